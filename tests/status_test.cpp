// common/status.h: the one error type.
#include <catch2/catch.hpp>

#include <cerrno>

#include "common/status.h"

using hwfarm::Code;
using hwfarm::Evidence;
using hwfarm::FailureClass;
using hwfarm::Result;
using hwfarm::Status;

TEST_CASE("an ok Status has no code, message, class or evidence") {
  Status s;
  CHECK(s.ok());
  CHECK(static_cast<bool>(s));
  CHECK(s.code() == Code::ok);
  CHECK(s.message().empty());
  CHECK(s.failureClass() == FailureClass::none);
  CHECK(s.evidence().empty());
  CHECK(s.toString() == "ok");
}

TEST_CASE("an error keeps code, message, class and evidence through copies and moves") {
  Evidence e;
  e.exit_code = 2;
  e.tool_output = "Error: target voltage 0.0 V";
  e.console = "boot\n";
  Status s = Status::infrastructure(Code::io_error, "openocd exited with status 2", e);
  Status copy = s;
  Status moved = std::move(copy);
  for (const Status* x : {&s, &moved}) {
    CHECK_FALSE(x->ok());
    CHECK(x->code() == Code::io_error);
    CHECK(x->isInfrastructure());
    CHECK(x->message() == "openocd exited with status 2");
    REQUIRE(x->evidence().exit_code.has_value());
    CHECK(*x->evidence().exit_code == 2);
    CHECK(x->evidence().tool_output == "Error: target voltage 0.0 V");
    CHECK(x->evidence().console == "boot\n");
  }
  CHECK(s.toString() == "io_error (infrastructure): openocd exited with status 2");
  // A copy is deep: changing one leaves the other.
  Status context = s.withContext("flash nucleo-0");
  CHECK(context.message() == "flash nucleo-0: openocd exited with status 2");
  CHECK(s.message() == "openocd exited with status 2");
  CHECK(context.evidence().tool_output == s.evidence().tool_output);
}

TEST_CASE("a test failure is of the test class, an error of none") {
  Status t = Status::testFailure("2 of 5 cases failed");
  CHECK(t.failureClass() == FailureClass::test);
  CHECK_FALSE(t.isInfrastructure());
  CHECK(t.toString() == "conflict (test): 2 of 5 cases failed");
  Status e = Status::error(Code::invalid_argument, "count must be 1..64");
  CHECK(e.failureClass() == FailureClass::none);
  CHECK(e.is(Code::invalid_argument));
  CHECK(e.toString() == "invalid_argument: count must be 1..64");
}

TEST_CASE("errno becomes a message and a code in one place") {
  Status missing = Status::fromErrno("open /dev/ttyACM9", ENOENT);
  CHECK(missing.code() == Code::not_found);
  CHECK(missing.isInfrastructure());
  CHECK(missing.message() == "open /dev/ttyACM9: No such file or directory");
  CHECK(Status::fromErrno("lock", EBUSY).code() == Code::busy);
  CHECK(Status::fromErrno("read", ETIMEDOUT).code() == Code::timeout);
  CHECK(Status::fromErrno("write", EIO).code() == Code::io_error);
  CHECK(Status::fromErrno("write", EIO).message() == "write: Input/output error");
}

TEST_CASE("a Result holds a value or the Status saying why not") {
  Result<std::string> good(std::string("ttyACM0"));
  REQUIRE(good.ok());
  CHECK(*good == "ttyACM0");
  CHECK(good->size() == 7);
  CHECK(good.status().ok());
  Result<std::string> bad(Status::error(Code::not_found, "no board nucleo-9"));
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().is(Code::not_found));
  Status taken = std::move(bad).takeStatus();
  CHECK(taken.message() == "no board nucleo-9");
  Result<std::string> moved_value = std::move(good);
  CHECK(std::move(moved_value).value() == "ttyACM0");
}
