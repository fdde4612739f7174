// One error type for the whole daemon (LevelDB's Status, with a failure
// class for board work): drivers, services and the store return a Status or
// a Result<T>; exceptions are left to start-up and config load.
//
// An ok Status is a null pointer: returning success costs nothing. An error
// carries a code (what kind of failure, for the caller's branches and the
// HTTP status), a human message (what failed and why, for logs and
// clients) and, for board work, a failure class with evidence:
//   infrastructure  the lab failed the test: board absent or lost, flash tool
//                   error or timeout, power switch error, no console output,
//                   simulator crashed, daemon-side I/O error
//   test            the firmware failed: a failing test, an output below its
//                   accuracy threshold, a failing end marker
// Only infrastructure failures count against the tier SLA (DESIGN.md).
//
// errno becomes text in one place: Status::fromErrno.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hwfarm {

enum class Code {
  ok,
  invalid_argument, // the caller's input is wrong
  not_found,        // no such board, lease, file
  busy,             // refused: another operation runs (not a failure of the board)
  unsupported,      // the board has no such capability (power.driver = "none")
  conflict,         // the state does not allow it (lease not active, board leased)
  permission_denied, // the caller may not (a path outside the allowed roots)
  too_large,        // over a configured size limit
  timeout,          // a deadline passed
  unavailable,      // the thing is gone or not ready (board vanished, daemon stopping)
  io_error,         // the OS or a tool failed
  no_space,         // the disk is full, or would be past limits.disk_reserve_bytes
  internal,         // a bug: an invariant broke
};

// "invalid_argument", "not_found", ...
std::string_view codeName(Code code);

enum class FailureClass {
  none,           // not board work, or not classified
  infrastructure, // counts against the SLA
  test,           // the firmware's own failure
};

std::string_view failureClassName(FailureClass c);

// What was seen when board work failed.
struct Evidence {
  std::optional<int> exit_code; // the tool's exit status, when it exited
  int signal = 0;               // the signal that ended the tool
  std::string tool_output;      // the tail of the tool's output
  std::string console;          // the last console lines
  bool empty() const { return !exit_code && signal == 0 && tool_output.empty() && console.empty(); }
};

class [[nodiscard]] Status {
 public:
  Status() = default; // ok
  Status(const Status& other) : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status success() { return {}; }
  // REQUIRES: code != Code::ok.
  static Status error(Code code, std::string message) {
    return Status(code, FailureClass::none, std::move(message), {});
  }
  // A failure of the lab (board, tool, simulator, daemon I/O).
  static Status infrastructure(Code code, std::string message, Evidence evidence = {}) {
    return Status(code, FailureClass::infrastructure, std::move(message), std::move(evidence));
  }
  // A failure of the firmware under test.
  static Status testFailure(std::string message, Evidence evidence = {}) {
    return Status(Code::conflict, FailureClass::test, std::move(message), std::move(evidence));
  }
  // "what: strerror(err)", as an infrastructure failure (Code::not_found
  // for ENOENT, timeout for ETIMEDOUT, busy for EBUSY, else io_error).
  static Status fromErrno(std::string_view what, int err);

  bool ok() const { return state_ == nullptr; }
  explicit operator bool() const { return ok(); }
  Code code() const { return state_ ? state_->code : Code::ok; }
  bool is(Code code) const { return this->code() == code; }
  FailureClass failureClass() const { return state_ ? state_->failure : FailureClass::none; }
  bool isInfrastructure() const { return failureClass() == FailureClass::infrastructure; }
  const std::string& message() const { return state_ ? state_->message : emptyString(); }
  const Evidence& evidence() const { return state_ ? state_->evidence : emptyEvidence(); }

  // The same failure, with `context` in front of the message ("flash: ...").
  Status withContext(std::string_view context) const&;
  Status withContext(std::string_view context) &&;
  Status withEvidence(Evidence evidence) &&;

  // "ok", or "<code>: <message>" (with the class when it has one).
  std::string toString() const;

 private:
  struct State {
    Code code;
    FailureClass failure;
    std::string message;
    Evidence evidence;
  };
  Status(Code code, FailureClass failure, std::string message, Evidence evidence)
      : state_(std::make_unique<State>(State{code, failure, std::move(message), std::move(evidence)})) {
    assert(code != Code::ok);
  }
  static const std::string& emptyString();
  static const Evidence& emptyEvidence();

  std::unique_ptr<State> state_;
};

// A value or the Status saying why there is none (std::expected, which g++
// 12 lacks, in the shape the daemon needs).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<1>, std::move(value)) {}      // NOLINT: implicit, like expected
  Result(Status status) : v_(std::in_place_index<0>, std::move(status)) { // NOLINT
    assert(!std::get<0>(v_).ok());
  }

  bool ok() const { return v_.index() == 1; }
  explicit operator bool() const { return ok(); }
  // Ok when there is a value.
  const Status& status() const { return ok() ? okStatus() : std::get<0>(v_); }
  Status takeStatus() && { return ok() ? Status() : std::move(std::get<0>(v_)); }

  // REQUIRES: ok().
  T& value() & { assert(ok()); return std::get<1>(v_); }
  const T& value() const& { assert(ok()); return std::get<1>(v_); }
  T&& value() && { assert(ok()); return std::move(std::get<1>(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  static const Status& okStatus() {
    static const Status ok;
    return ok;
  }
  std::variant<Status, T> v_;
};

} // namespace hwfarm
