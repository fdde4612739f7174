/* The few hardware pieces the test firmware uses, and its report. */
#ifndef HWFARM_FIRMWARE_HW_H
#define HWFARM_FIRMWARE_HW_H

#include <stdint.h>

#include "hwfarm_report.h"

void uart_init(void);
void uart_putc(char c);
void uart_flush(void); /* waits until the UART took the last byte */
void uart_puts(const char* s);
void uart_put_uint(uint32_t v);
void uart_put_int(int v);

/* The board's identity word: hwfarm's simulator writes it into guest RAM
   before the firmware starts (drivers::QemuBoard, docs/drivers.md): 1 on a
   run's target, 0 on its reference simulator (and under a bare QEMU, whose
   RAM starts zeroed). mps2.ld keeps the firmware out of the 256 bytes from
   this address on. */
#define HWFARM_IDENTITY_ADDR 0x203FFF00u
#define HWFARM_IDENTITY_TARGET 1u
static inline uint32_t board_identity(void) { return *(volatile const uint32_t*)HWFARM_IDENTITY_ADDR; }

/* The firmware's result report (firmware/hwfarm_report.h), on UART0. */
extern hwfarm_report report;

/* Prints `HWFARM END status=<status>`, then resets the core. */
__attribute__((noreturn)) void firmware_end(int status);
/* Resets the core: a simulator (run with -no-reboot) stops. */
__attribute__((noreturn)) void system_reset(void);

#endif
