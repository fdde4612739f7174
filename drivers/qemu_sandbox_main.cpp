// hwfarm-qemu-sandbox: the QEMU sandbox service (drivers/qemu_sandbox.h),
// started by systemd for each connection to hwfarm-qemu-sandbox.socket with
// the connection as its standard input. It answers on the same descriptor.
#include "drivers/qemu_sandbox.h"

int main() { return hwfarm::drivers::serveSandboxRequest(0); }
