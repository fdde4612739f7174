#include "daemon/api/session_phase.h"

namespace hwfarm::api {

std::optional<Phase> nextPhase(Phase from, SessionEvent event, AfterAnswer after, bool tls) {
  using E = SessionEvent;
  using P = Phase;
  Phase close = tls ? P::tls_closing : P::closed;
  if (from == P::closed) return P::closed; // late completions of cancelled operations
  if (event == E::peer_gone) return P::closed;
  if (event == E::stopping) {
    // Nothing was handed to a handler yet: closed now. An answer in the
    // works goes out first (and then the connection closes).
    switch (from) {
      case P::handshake:
      case P::idle:
      case P::reading:
      case P::continuing:
      case P::read_timed_out:
      case P::draining:
      case P::tls_closing:
        return P::closed;
      default:
        return from;
    }
  }
  switch (from) {
    case P::handshake:
      if (event == E::handshake_done) return P::idle;
      if (event == E::deadline) return P::closed;
      break;
    case P::idle:
      if (event == E::request_started) return P::reading;
      if (event == E::answer_ready) return P::writing; // the 503 of a connection over the limit
      if (event == E::deadline) return P::closed;
      break;
    case P::reading:
      if (event == E::continue_needed) return P::continuing;
      if (event == E::request_read) return P::answering;
      if (event == E::answer_ready) return P::writing; // a refusal: limits, a bad request, storage
      if (event == E::deadline) return P::read_timed_out;
      break;
    case P::continuing:
      if (event == E::continue_sent) return P::reading;
      if (event == E::deadline) return P::closed;
      break;
    case P::read_timed_out:
      if (event == E::answer_ready) return P::writing; // the 408
      break;
    case P::answering:
    case P::watching:
      if (event == E::answer_ready) return P::writing;
      if (event == E::stream_started) return P::streaming;
      if (event == E::wait_watched) return P::watching;
      break;
    case P::writing:
      if (event == E::written) {
        switch (after) {
          case AfterAnswer::next_request: return P::idle;
          case AfterAnswer::drain: return P::draining;
          case AfterAnswer::close: return close;
        }
      }
      if (event == E::deadline) return P::closed;
      break;
    case P::streaming:
      if (event == E::stream_ended) return P::stream_ending;
      if (event == E::deadline) return P::closed;
      break;
    case P::stream_ending:
      if (event == E::written) return close;
      if (event == E::deadline) return P::closed;
      break;
    case P::draining:
      if (event == E::deadline) return P::closed;
      break;
    case P::tls_closing:
      if (event == E::written || event == E::deadline) return P::closed;
      break;
    case P::closed:
      break;
  }
  return std::nullopt;
}

Deadline deadlineOf(Phase phase) {
  switch (phase) {
    case Phase::handshake:
    case Phase::reading:
    case Phase::continuing:
    case Phase::draining:
    case Phase::tls_closing:
      return Deadline::header;
    case Phase::idle:
    case Phase::writing:
      return Deadline::idle;
    case Phase::streaming:
    case Phase::stream_ending:
      return Deadline::per_write;
    case Phase::read_timed_out:
    case Phase::answering:
    case Phase::watching:
    case Phase::closed:
      return Deadline::none;
  }
  return Deadline::none;
}

std::string_view phaseName(Phase phase) {
  switch (phase) {
    case Phase::handshake: return "handshake";
    case Phase::idle: return "idle";
    case Phase::reading: return "reading";
    case Phase::continuing: return "continuing";
    case Phase::read_timed_out: return "read_timed_out";
    case Phase::answering: return "answering";
    case Phase::watching: return "watching";
    case Phase::writing: return "writing";
    case Phase::streaming: return "streaming";
    case Phase::stream_ending: return "stream_ending";
    case Phase::draining: return "draining";
    case Phase::tls_closing: return "tls_closing";
    case Phase::closed: return "closed";
  }
  return "?";
}

std::string_view eventName(SessionEvent event) {
  switch (event) {
    case SessionEvent::handshake_done: return "handshake_done";
    case SessionEvent::request_started: return "request_started";
    case SessionEvent::continue_needed: return "continue_needed";
    case SessionEvent::continue_sent: return "continue_sent";
    case SessionEvent::request_read: return "request_read";
    case SessionEvent::answer_ready: return "answer_ready";
    case SessionEvent::stream_started: return "stream_started";
    case SessionEvent::wait_watched: return "wait_watched";
    case SessionEvent::written: return "written";
    case SessionEvent::stream_ended: return "stream_ended";
    case SessionEvent::deadline: return "deadline";
    case SessionEvent::peer_gone: return "peer_gone";
    case SessionEvent::stopping: return "stopping";
  }
  return "?";
}

} // namespace hwfarm::api
