#include "config/number_text.h"

#include <array>
#include <charconv>

namespace trainctl::config::detail {

namespace {
std::string_view without_plus(std::string_view text) {
  // from_chars accepts '-' but not '+'; "+-1" must still be rejected.
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  return text;
}
}  // namespace

std::optional<long long> parse_integer(std::string_view text) {
  text = without_plus(text);
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<unsigned long long> parse_unsigned(std::string_view text) {
  text = without_plus(text);
  unsigned long long value = 0;
  if (text.empty() || text[0] == '-') return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_real(std::string_view text) {
  text = without_plus(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string format_real(double value) {
  std::array<char, 32> buffer{};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  (void)ec;  // 32 characters hold any double's shortest form
  return std::string(buffer.data(), end);
}

}  // namespace trainctl::config::detail
