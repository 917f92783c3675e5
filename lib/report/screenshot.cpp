#include "report/screenshot.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/error.h"

namespace trainctl::report {

namespace {

namespace fs = std::filesystem;

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

std::string tail_of(const fs::path& file, size_t max_chars) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  const std::string t = s.str();
  return t.size() > max_chars ? t.substr(t.size() - max_chars) : t;
}

}  // namespace

std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  std::vector<std::string> all;
  while (std::getline(dirs, dir, ':')) all.push_back(dir);
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const std::string& d : all) {
      const fs::path p = fs::path(d.empty() ? "." : d) / name;
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return "";
}

int page_height_hint(const std::string& html, int width) {
  const double usable = width - 48;
  double height = 120, row_w = 0, row_h = 0;
  for (size_t i = html.find("<svg "); i != std::string::npos; i = html.find("<svg ", i + 1)) {
    const size_t w = html.find("width=\"", i), h = html.find("height=\"", i);
    if (w == std::string::npos || h == std::string::npos) break;
    const double sw = std::atof(html.c_str() + w + 7), sh = std::atof(html.c_str() + h + 8);
    if (row_w > 0 && row_w + sw + 12 > usable) {
      height += row_h + 12;
      row_w = row_h = 0;
    }
    row_w += sw + 12;
    row_h = std::max(row_h, sh + 4);
  }
  height += row_h;
  height += 50.0 * count_of(html, "<h2>") + 26.0 * count_of(html, "<tr>") +
            34.0 * count_of(html, "<p") + 20.0 * count_of(html, "<li>");
  return static_cast<int>(std::min(height + 40, 16000.0));
}

void screenshot_png(const fs::path& html, const std::string& html_text, const fs::path& png,
                    int width) {
  const std::string browser = find_chromium();
  if (browser.empty()) {
    throw InputError(
        "--png needs a headless Chromium and none is on PATH (chromium, "
        "chromium-browser, google-chrome); on Debian: apt-get install chromium. "
        "The HTML page is " +
        html.string());
  }
  char profile_template[] = "/tmp/trainctl-chromium-XXXXXX";
  if (!::mkdtemp(profile_template)) throw std::runtime_error("cannot create a temporary directory");
  const fs::path profile = profile_template;
  const fs::path log = profile / "browser.log";
  const int height = page_height_hint(html_text, width);
  std::vector<std::string> args = {
      browser,
      "--headless",
      "--no-sandbox",  // root in containers has no user namespace
      "--disable-gpu",
      "--hide-scrollbars",
      "--no-first-run",
      "--user-data-dir=" + profile.string(),
      "--window-size=" + std::to_string(width) + "," + std::to_string(height),
      "--screenshot=" + fs::absolute(png).string(),
      "file://" + fs::absolute(html).string()};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start " + browser);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::setpgid(0, 0);  // its helper processes go with it on a timeout
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      const std::string out = tail_of(log, 2000);
      fs::remove_all(profile);
      throw std::runtime_error(browser + " took longer than 60 s to take the screenshot:\n" + out);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string out = tail_of(log, 2000);
  fs::remove_all(profile);
  std::error_code ec;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::is_regular_file(png, ec) ||
      fs::file_size(png, ec) == 0) {
    throw std::runtime_error(browser + " did not write " + png.string() + ":\n" + out);
  }
}

}  // namespace trainctl::report
