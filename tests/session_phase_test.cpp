// The HTTP connection's state machine (daemon/api/session_phase.h) as
// stories: the phases a connection goes through, and what each phase does
// with the events it does not expect.
#include <catch2/catch.hpp>

#include <vector>

#include "daemon/api/session_phase.h"

using namespace hwfarm::api;
using E = SessionEvent;
using P = Phase;

namespace {

// Feeds `events` from `start`; the phases visited, or a throw naming the
// first unexpected event.
std::vector<Phase> walk(Phase start, std::vector<SessionEvent> events, AfterAnswer after = AfterAnswer::next_request,
                        bool tls = false) {
  std::vector<Phase> seen{start};
  for (SessionEvent e : events) {
    auto next = nextPhase(seen.back(), e, after, tls);
    if (!next) throw std::runtime_error(std::string(eventName(e)) + " in " + std::string(phaseName(seen.back())));
    seen.push_back(*next);
  }
  return seen;
}

} // namespace

TEST_CASE("a keep-alive request: idle, reading, answering, writing, idle again") {
  // Given a plain connection, when a request is read, answered and written,
  // the connection waits for the next one.
  CHECK(walk(P::idle, {E::request_started, E::request_read, E::answer_ready, E::written}) ==
        std::vector<Phase>{P::idle, P::reading, P::answering, P::writing, P::idle});
  // Over TLS, the handshake comes first.
  CHECK(walk(P::handshake, {E::handshake_done, E::request_started}, AfterAnswer::next_request, true) ==
        std::vector<Phase>{P::handshake, P::idle, P::reading});
}

TEST_CASE("a long-poll: watched while it waits, and a client leaving closes it") {
  // Given a request the handler answers later and watches the client for,
  auto waiting = walk(P::idle, {E::request_started, E::request_read, E::wait_watched});
  CHECK(waiting.back() == P::watching);
  // the answer is written when it comes,
  CHECK(nextPhase(P::watching, E::answer_ready, AfterAnswer::next_request, false) == P::writing);
  // and a client leaving before closes the connection.
  CHECK(nextPhase(P::watching, E::peer_gone, AfterAnswer::next_request, false) == P::closed);
}

TEST_CASE("what follows a written answer: the next request, a drain, close_notify or the close") {
  CHECK(nextPhase(P::writing, E::written, AfterAnswer::next_request, false) == P::idle);
  CHECK(nextPhase(P::writing, E::written, AfterAnswer::drain, false) == P::draining);
  CHECK(nextPhase(P::writing, E::written, AfterAnswer::close, false) == P::closed);
  CHECK(nextPhase(P::writing, E::written, AfterAnswer::close, true) == P::tls_closing);
  CHECK(nextPhase(P::tls_closing, E::written, AfterAnswer::close, true) == P::closed);
}

TEST_CASE("a request that is too slow gets its 408 after the read is cancelled") {
  // Given a request still being read at its deadline,
  auto phases = walk(P::idle, {E::request_started, E::deadline, E::answer_ready}, AfterAnswer::close);
  // the read is cancelled (read_timed_out), then the 408 is written.
  CHECK(phases == std::vector<Phase>{P::idle, P::reading, P::read_timed_out, P::writing});
  // An idle connection past its deadline, or a client that does not take its answer, is closed.
  CHECK(nextPhase(P::idle, E::deadline, AfterAnswer::next_request, false) == P::closed);
  CHECK(nextPhase(P::writing, E::deadline, AfterAnswer::next_request, false) == P::closed);
}

TEST_CASE("an upload: 100 Continue keeps the request's deadline, a refusal is drained") {
  CHECK(walk(P::reading, {E::continue_needed, E::continue_sent, E::request_read}) ==
        std::vector<Phase>{P::reading, P::continuing, P::reading, P::answering});
  CHECK(walk(P::reading, {E::answer_ready, E::written, E::peer_gone}, AfterAnswer::drain) ==
        std::vector<Phase>{P::reading, P::writing, P::draining, P::closed});
  CHECK(deadlineOf(P::continuing) == deadlineOf(P::reading));
}

TEST_CASE("a stream: pieces until the handler ends it, then the close") {
  CHECK(walk(P::answering, {E::stream_started, E::stream_ended, E::written, E::written}, AfterAnswer::close, true) ==
        std::vector<Phase>{P::answering, P::streaming, P::stream_ending, P::tls_closing, P::closed});
  CHECK(deadlineOf(P::streaming) == Deadline::per_write);
  CHECK(nextPhase(P::streaming, E::deadline, AfterAnswer::close, false) == P::closed);
}

TEST_CASE("the server stopping closes what no handler has, and lets answers finish") {
  for (Phase p : {P::handshake, P::idle, P::reading, P::continuing, P::read_timed_out, P::draining, P::tls_closing})
    CHECK(nextPhase(p, E::stopping, AfterAnswer::next_request, false) == P::closed);
  for (Phase p : {P::answering, P::watching, P::writing, P::streaming, P::stream_ending})
    CHECK(nextPhase(p, E::stopping, AfterAnswer::next_request, false) == p);
}

TEST_CASE("an event a phase does not expect is refused, and a closed connection stays closed") {
  CHECK_FALSE(nextPhase(P::idle, E::request_read, AfterAnswer::next_request, false));
  CHECK_FALSE(nextPhase(P::writing, E::answer_ready, AfterAnswer::next_request, false));
  CHECK_FALSE(nextPhase(P::answering, E::written, AfterAnswer::next_request, false));
  CHECK_FALSE(nextPhase(P::handshake, E::request_started, AfterAnswer::next_request, true));
  for (E e : {E::handshake_done, E::request_started, E::answer_ready, E::written, E::deadline, E::peer_gone})
    CHECK(nextPhase(P::closed, e, AfterAnswer::next_request, false) == P::closed);
}
