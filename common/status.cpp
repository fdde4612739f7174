#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace hwfarm {

std::string_view codeName(Code code) {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::not_found: return "not_found";
    case Code::busy: return "busy";
    case Code::unsupported: return "unsupported";
    case Code::conflict: return "conflict";
    case Code::permission_denied: return "permission_denied";
    case Code::too_large: return "too_large";
    case Code::timeout: return "timeout";
    case Code::unavailable: return "unavailable";
    case Code::io_error: return "io_error";
    case Code::no_space: return "no_space";
    case Code::internal: return "internal";
  }
  return "unknown";
}

std::string_view failureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::none: return "none";
    case FailureClass::infrastructure: return "infrastructure";
    case FailureClass::test: return "test";
  }
  return "unknown";
}

Status Status::fromErrno(std::string_view what, int err) {
  char buffer[256];
  // GNU strerror_r: returns the text (maybe not in buffer).
  const char* text = strerror_r(err, buffer, sizeof buffer);
  Code code = Code::io_error;
  switch (err) {
    case ENOENT: case ENODEV: case ENXIO: code = Code::not_found; break;
    case ETIMEDOUT: code = Code::timeout; break;
    case EBUSY: case EAGAIN: code = Code::busy; break;
    case EINVAL: case ENAMETOOLONG: code = Code::invalid_argument; break;
    case ENOSPC: case EDQUOT: code = Code::no_space; break;
    default: break;
  }
  std::string message(what);
  message += ": ";
  message += text;
  return infrastructure(code, std::move(message));
}

Status Status::withContext(std::string_view context) const& {
  return Status(*this).withContext(context);
}

Status Status::withContext(std::string_view context) && {
  if (state_) {
    std::string message(context);
    message += ": ";
    message += state_->message;
    state_->message = std::move(message);
  }
  return std::move(*this);
}

Status Status::withEvidence(Evidence evidence) && {
  if (state_) state_->evidence = std::move(evidence);
  return std::move(*this);
}

std::string Status::toString() const {
  if (!state_) return "ok";
  std::string out(codeName(state_->code));
  if (state_->failure != FailureClass::none) {
    out += " (";
    out += failureClassName(state_->failure);
    out += ")";
  }
  out += ": ";
  out += state_->message;
  return out;
}

const std::string& Status::emptyString() {
  static const std::string empty;
  return empty;
}

const Evidence& Status::emptyEvidence() {
  static const Evidence empty;
  return empty;
}

} // namespace hwfarm
