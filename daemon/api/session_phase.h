// One HTTP connection's life as one state machine (STYLE.md habit 13): the
// phase it is in, the events that move it, and the deadline each phase
// runs under. Pure: the server (server.cpp) does the I/O of each phase and
// asks nextPhase() where an event leads; nothing else changes the phase.
#pragma once

#include <optional>
#include <string_view>

namespace hwfarm::api {

enum class Phase {
  handshake,      // TLS: the handshake
  idle,           // waiting for the first byte of the next request
  reading,        // a request's head and body
  continuing,     // writing "100 Continue" before the client sends its body
  read_timed_out, // the read was cancelled at its deadline: a 408 follows
  answering,      // the handler has the request and answers when it can
  watching,       // answering, and a read watches for the client leaving meanwhile
  writing,        // the answer goes out
  streaming,      // a streamed answer, written piece by piece as the handler gives them
  stream_ending,  // the handler ended its stream: what is queued goes out, then the close
  draining,       // after refusing an upload: its body is read and dropped until the client closes
  tls_closing,    // TLS: close_notify goes out before the close
  closed,
};

enum class SessionEvent {
  handshake_done,
  request_started, // bytes of a request arrived
  continue_needed, // the head asks for "100 Continue"
  continue_sent,
  request_read,    // the whole request: it goes to the handler
  answer_ready,    // an answer to write: the handler's, or the server's own (4xx, 5xx, 503 over the limit)
  stream_started,  // the handler's answer is a stream
  wait_watched,    // the handler answers later and wants to hear of the client leaving
  written,         // the answer (or the stream's rest, or close_notify) went out
  stream_ended,    // the handler ended its stream
  deadline,        // the phase's deadline passed
  peer_gone,       // the client closed the connection, or an I/O error
  stopping,        // the server stops: a connection without a request in a handler closes now,
                   // the others after their answer
};

// Where a written answer leads.
enum class AfterAnswer {
  next_request, // keep-alive
  close,
  drain,        // an upload was refused unread: read and drop it, then close
};

// The phase `event` leads to from `from`. `after` decides where `written`
// leads from `writing`; with `tls`, a close sends close_notify first.
// `stopping` leaves the phases from answering to stream_ending as they are
// (their answer goes out, then the connection closes). Returns nothing for
// an event `from` does not expect (a bug in the server: it closes).
std::optional<Phase> nextPhase(Phase from, SessionEvent event, AfterAnswer after, bool tls);

// The limit a phase runs under.
enum class Deadline {
  none,
  header,    // limits.header_timeout_s: the whole request, an upload chunk, a handshake, a drain
  idle,      // limits.idle_timeout_s: the next request, or the client taking the answer
  per_write, // limits.idle_timeout_s for each piece of a stream while it is being written
};
Deadline deadlineOf(Phase phase);

std::string_view phaseName(Phase phase);
std::string_view eventName(SessionEvent event);

} // namespace hwfarm::api
