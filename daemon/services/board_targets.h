// The real target runner (target_runner.h): boards through the board
// service, images on fresh simulators (drivers/simulator_run) on a pool of
// runs.max_simulators threads, each lease within its share of them
// (core/run/simulator_share.h), golden outputs read off the loop (on a
// thread of their own, never behind a simulator). A board's
// kind comes from its configuration: driver "qemu" is simulated, a USB board
// with a power switch is switched, one with power.driver = "none" unswitched
// (its flasher's reset starts it: it is never powered).
//
// Thread safety: every call on the event loop thread.
#pragma once

#include <memory>

#include "config/fleet_config.h"
#include "daemon/services/target_runner.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class BoardService;

class BoardTargets final : public TargetRunner {
 public:
  // Simulators keep their scratch in <state_dir>/simulators/ (emptied
  // now: what a killed hwfarmd left there).
  BoardTargets(boost::asio::io_context& io, const config::FleetConfig& config, BoardService& boards);
  // Waits for the simulators running (each stops at its deadline or stop).
  ~BoardTargets() override;

  void reconfigure(const config::FleetConfig& config);

  std::optional<run::BoardInfo> board(const std::string& name) const override;
  void flash(const lease::Lease& lease, const std::string& board, const std::string& image, FlashDone done) override;
  void power(const lease::Lease& lease, const std::string& board, run::PowerStep step, Done done) override;
  void powerOff(const lease::Lease& lease, const std::string& board, Done done) override;
  std::function<void()> watch(const std::string& board, std::function<void(const ConsoleLine&)> on_line,
                              ConsoleClosed on_closed) override;
  void release(const std::string& lease_id, const std::string& board) override;
  void simulate(SimulatorJob job, std::function<void()> started, std::function<void(SimulatorResult)> ended) override;
  void stopSimulator(const std::shared_ptr<std::atomic<bool>>& stop) override;
  void readGolden(const std::string& path, ReadDone done) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
