#pragma once
// A PNG of an HTML page, taken by a headless Chromium (Debian's `chromium`) for
// `trainctl report --png`. No browser, no picture: an InputError says what to install.
#include <filesystem>
#include <string>

namespace trainctl::report {

// Finds chromium / chromium-browser / google-chrome on PATH; "" when there is none.
std::string find_chromium();

// Renders `html` (a file) at `width` px and the height its charts need into `png`.
// Throws InputError when no browser is installed, std::runtime_error (with the browser's
// last output lines) when it fails or takes longer than a minute.
void screenshot_png(const std::filesystem::path& html, const std::string& html_text,
                    const std::filesystem::path& png, int width = 1280);

// The page height that shows all of `html_text` (trainctl's report) at `width`: its SVG
// charts packed into rows, plus headings, tables and paragraphs.
int page_height_hint(const std::string& html_text, int width);

}  // namespace trainctl::report
