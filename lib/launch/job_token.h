#pragma once
// The job token: a shared secret that every launcher and worker of one job presents to the
// rendezvous store, so that a stray process (another job reusing the port, a scanner)
// cannot join or poison the job. Node 0 makes one unless the user gives it; other nodes
// get it from the user or from the token file node 0 writes into the (shared) run_dir.
#include <filesystem>
#include <optional>
#include <string>

namespace trainctl::launch {

// 128 random bits from /dev/urandom as 32 hex digits. Throws std::runtime_error if the
// kernel's random source cannot be read.
std::string generate_token();

// The token file inside a run directory: <run_dir>/.rendezvous_token.
std::filesystem::path token_file_path(const std::filesystem::path& run_dir);

// Writes the token with mode 0600, atomically (temporary file + rename), so a reader sees
// either the old file or the complete new one. Throws std::runtime_error on failure.
void write_token_file(const std::filesystem::path& file, const std::string& token);

// The token from the file, or nullopt if it does not exist (yet) or is empty.
std::optional<std::string> read_token_file(const std::filesystem::path& file);

}  // namespace trainctl::launch
