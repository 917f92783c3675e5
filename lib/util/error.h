#pragma once
#include <stdexcept>
#include <string>

namespace trainctl {

// Bad user input (command line or job spec). The CLI maps it to exit code 2.
// The message is complete and actionable: file:line:col, key path, what is wrong, the fix.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Errors raised while connecting workers (store, rendezvous). Exit code 5.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainctl
