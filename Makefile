# The two commands from README.md: `make demo` and `make test`; CI's extra
# builds (docs/testing.md): `make test-asan`, `make test-tsan`, `make fuzz`.
SOURCE_DIR := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
# The build type of a first `make demo` in a build dir not configured yet
# (Quick: -O1, no debug information); `make test` rebuilds it as BUILD_TYPE.
DEMO_BUILD_TYPE ?= Quick
JOBS ?= 2
CMAKE_FLAGS ?=
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CXX ?= clang++-14
# Sanitizer and fuzz builds: -O1 with line tables (what the sanitizers
# recommend; compiles much faster than -O2 -g on 2 cores).
SAN_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"
# The fuzz build compiles toml++ from its headers: with NDEBUG, as Debian's
# library is built (its debug assertions fire on input it reports as a
# syntax error, e.g. "[+").
FUZZ_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
# The store, lease, HTTP server and run tests (every test of these
# binaries), and what they need built.
TSAN_TARGETS ?= hwfarmd hwfarmctl store_test lease_api_test lease_stress_test lease_scheduler_test daemon_process_test hwfarmctl_test run_api_test hwfarm_firmware
TSAN_TESTS ?= ^(store_test|lease_api_test|lease_stress_test|lease_scheduler_test|daemon_process_test|hwfarmctl_test|run_api_test|run_retry_test|health_service_test|upload_api_test|sla_service_test):
# A sanitizer report fails the process (and the test): reports also go to
# files under <build>/sanitizer/, which a test run must leave empty, so a
# report from a daemon a test killed is not lost in that test's temp dir.
# verify_asan_link_order=0: the tests LD_PRELOAD fakes (failsync, umockdev).
# Under umockdev-run's preload ASan's log_path crashes hwfarmd at start-up,
# so the tests that start hwfarmd there (UMOCKDEV_TESTS) run in a second
# pass whose ASan reports go to stderr only.
SAN_COMMON = halt_on_error=1:print_stacktrace=1
ASAN_BASE = $(SAN_COMMON):detect_leaks=1:verify_asan_link_order=0
ASAN_ENV = ASAN_OPTIONS=$(ASAN_BASE):log_path=$(CURDIR)/$(ASAN_DIR)/sanitizer/asan \
           UBSAN_OPTIONS=$(SAN_COMMON):log_path=$(CURDIR)/$(ASAN_DIR)/sanitizer/ubsan
UMOCKDEV_TESTS = ^usb_daemon_test:
# Not under ASan: tests whose subject runs no sanitized code (scripts, the
# firmware build, the Jenkins library, lints) or is not the C++ (the
# dashboard's JavaScript in a browser, the benchmarks' timing); the test
# phase runs each of them.
ASAN_SKIP = ^(systemd_build_daemon|systemd_unit_verify|firmware_report_cortex_m|bench_.*_smoke|core_purity.*|prometheus_rules|daemon_layers|fuzz_targets_listed|test_names_whole|jenkins_library|leaked_processes_check|dashboard_browser_.*)$$
TSAN_ENV = TSAN_OPTIONS=$(SAN_COMMON):second_deadlock_stack=1:log_path=$(CURDIR)/$(TSAN_DIR)/sanitizer/tsan

# No "make: Entering directory" lines from the makes CMake's build runs.
MAKEFLAGS += --no-print-directory
# For scripts/demo.sh, which builds the demo's targets itself.
export BUILD_TYPE DEMO_BUILD_TYPE JOBS CMAKE_FLAGS

DEB_DIR ?= $(BUILD_DIR)/deb
# cmake arguments of the package's build (a compiler launcher, say); the
# other build flags are Debian's (dpkg-buildflags).
DEB_CMAKE_FLAGS ?=

.PHONY: all deps build test demo bench bench-against bench-runs-against clean test-asan test-tsan fuzz soak deb test-deb

all: build

# Every package of the build, the tests and CI (scripts/install-deps.sh's
# test group; `make demo` installs only its demo group).
deps:
	@./scripts/install-deps.sh test

# Configured with the tests, also a build dir that `make demo` configured
# without them (the demo needs none of the test packages).
build: deps
	@grep -qs '^HWFARM_BUILD_TESTS:BOOL=ON$$' $(BUILD_DIR)/CMakeCache.txt && \
	  grep -qs '^CMAKE_BUILD_TYPE:STRING=$(BUILD_TYPE)$$' $(BUILD_DIR)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DHWFARM_BUILD_TESTS=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# The whole suite with AddressSanitizer + UndefinedBehaviorSanitizer (g++);
# the hwfarmd the tests start is the sanitized one of this build.
test-asan: deps
	@cmake -S . -B $(ASAN_DIR) $(SAN_CMAKE) -DHWFARM_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_DIR) -j$(JOBS)
	$(ASAN_ENV) ./scripts/sanitizer-reports.sh $(ASAN_DIR) -j$(JOBS) -E '$(UMOCKDEV_TESTS)|$(ASAN_SKIP)'
	$(ASAN_ENV) ASAN_OPTIONS=$(ASAN_BASE) ./scripts/sanitizer-reports.sh $(ASAN_DIR) -j$(JOBS) -R '$(UMOCKDEV_TESTS)'

# The store, lease and server tests with ThreadSanitizer; its build compiles
# file by file (no unity batches), so a source that compiles only beside
# its batch's neighbours fails here.
test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) $(SAN_CMAKE) -DHWFARM_TSAN=ON -DHWFARM_UNITY_BUILD=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_DIR) -j$(JOBS) --target $(TSAN_TARGETS)
	$(TSAN_ENV) ./scripts/sanitizer-reports.sh $(TSAN_DIR) -j$(JOBS) -R '$(TSAN_TESTS)'

# libFuzzer targets (clang, ASan + UBSan), each run for FUZZ_SECONDS.
fuzz: deps
	@cmake -S . -B $(FUZZ_DIR) $(FUZZ_CMAKE) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DHWFARM_FUZZ=ON -DHWFARM_BUILD_TESTS=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_DIR) -j$(JOBS) --target hwfarm_fuzzers
	./scripts/run-fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# One hwfarmd for SOAK_SECONDS beside hostile tenants and the lab's faults;
# prints its table (docs/testing.md). As root (it mounts a small disk).
SOAK_SECONDS ?= 1800
soak: build
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target soak_test
	cd $(BUILD_DIR)/tests && SOAK_SECONDS=$(SOAK_SECONDS) ./soak_test '[.soak]'

bench: build
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync off
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync on
	$(BUILD_DIR)/bench/hwfarm_serial_bench
	$(BUILD_DIR)/bench/hwfarm_metrics_bench
	bench/run_bench.sh $(BUILD_DIR)
	node bench/dashboard_bench.mjs $(BUILD_DIR)

# The lease benchmark with another hwfarmd build as the baseline column:
#   make bench-against AGAINST=/path/to/old/hwfarmd
bench-against: build
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync off --against $(AGAINST)
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync on --against $(AGAINST)

# The run benchmark with another build directory (its hwfarmd and
# hwfarmctl) as the baseline column:
#   make bench-runs-against AGAINST_BUILD=/path/to/old/build
bench-runs-against: build
	bench/run_against.sh $(BUILD_DIR) $(AGAINST_BUILD)

# Only the demo's packages and targets; exec: Ctrl-C stops the demo, not a
# shell in between (make then has nothing to report).
demo:
	@exec $(SOURCE_DIR)scripts/demo.sh --build $(BUILD_DIR)

# The Debian package: $(DEB_DIR)/hwfarm_<version>_amd64.deb and its -dbgsym
# (docs/operations.md "The Debian package").
deb: deps
	@JOBS=$(JOBS) HWFARM_CMAKE_FLAGS="$(DEB_CMAKE_FLAGS)" ./packaging/build-deb.sh $(DEB_DIR)

# The package installed under a real systemd, with lintian, an upgrade from
# the previous commit's package and a purge (tests/packaging/run.sh; root).
test-deb: deps $(BUILD_DIR)/CMakeCache.txt
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target hwfarm_firmware
	JOBS=$(JOBS) HWFARM_CMAKE_FLAGS="$(DEB_CMAKE_FLAGS)" tests/packaging/run.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
