# The two commands from README.md: `make demo` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build test demo bench bench-against clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD_DIR)/CMakeCache.txt
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

bench: build
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync off
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync on
	$(BUILD_DIR)/bench/hwfarm_serial_bench

# The lease benchmark with another hwfarmd build as the baseline column:
#   make bench-against AGAINST=/path/to/old/hwfarmd
bench-against: build
	$(BUILD_DIR)/bench/hwfarm_lease_bench --fsync off --against $(AGAINST)

demo: build
	@./scripts/demo.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
