/* The few hardware pieces the test firmware uses, and how it prints. */
#ifndef HWFARM_FIRMWARE_HW_H
#define HWFARM_FIRMWARE_HW_H

#include <stdint.h>

void uart_init(void);
void uart_putc(char c);
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

/* Exact text of an f32: as printf("%.9g") writes it (9 significant digits,
   correctly rounded; strtof reads back the same bits), or its bit pattern in
   eight hex digits (f32x). `out` holds at least 16 bytes; returns the
   length. */
int format_f32(float f, char* out);
int format_f32x(float f, char* out);
int format_hex32(uint32_t v, char* out); /* eight lowercase hex digits */

/* One result record (docs/protocol.md), written as it goes: rec_begin()
   prints "HWFARM ", rec_end() the newline, after " *<CRC-32>" of the
   record's bytes in the variants that carry CRCs (crc, crcok). */
void rec_begin(void);
void rec_putc(char c);
/* Prints `sent` where the CRC covers `meant`: serial corruption on purpose. */
void rec_putc_corrupted(char meant, char sent);
void rec_puts(const char* s);
void rec_put_int(int v);
void rec_put_f32(float f);
void rec_put_f32x(float f);
void rec_end(void);

/* Prints `HWFARM END status=<status>` and idles forever. */
__attribute__((noreturn)) void firmware_end(int status);

#endif
