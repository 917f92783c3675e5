#pragma once
// Exact text <-> number conversions shared by the reader and the resolved-spec writer, so
// that a written spec reads back to bit-identical values.
#include <optional>
#include <string>
#include <string_view>

namespace trainctl::config::detail {

// A decimal integer with an optional sign, nothing else ("12", "-3", "+4"); nullopt for
// anything else or a value outside long long.
std::optional<long long> parse_integer(std::string_view text);

// A decimal integer in [0, 2^64) ("12", "+4"); nullopt otherwise.
std::optional<unsigned long long> parse_unsigned(std::string_view text);

// A decimal or scientific real ("0.1", "3e-4", "2"); nullopt for anything else. May return
// inf/nan for "inf"/"nan": callers check finiteness to word their own message.
std::optional<double> parse_real(std::string_view text);

// The shortest text that parses back to exactly `value` ("0.1", "1e-08", "300").
std::string format_real(double value);

}  // namespace trainctl::config::detail
