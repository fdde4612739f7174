/* Minimal Cortex-M start-up: vector table, .data/.bss set-up, then main().
   main's return value becomes the semihosting exit status, so QEMU exits
   with it. */
#include <stdint.h>

#include "hw.h"

extern uint32_t _data_load, _data_start, _data_end, _bss_start, _bss_end, _stack_top;
int main(void);
void reset_handler(void);

static void default_handler(void) {
  for (;;) {
  }
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(&_stack_top), reset_handler, default_handler, default_handler, default_handler,
    default_handler, default_handler, 0, 0, 0, 0, default_handler, default_handler, 0, default_handler,
    default_handler,
};

void reset_handler(void) {
  uint32_t* src = &_data_load;
  for (uint32_t* dst = &_data_start; dst < &_data_end;) *dst++ = *src++;
  for (uint32_t* dst = &_bss_start; dst < &_bss_end;) *dst++ = 0;
  semihosting_exit(main());
}

/* SYS_EXIT_EXTENDED (0x20): {reason, status}; QEMU exits with status. */
void semihosting_exit(int status) {
  uint32_t block[2] = {0x20026 /* ADP_Stopped_ApplicationExit */, (uint32_t)status};
  register uint32_t r0 __asm__("r0") = 0x20;
  register uint32_t* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xAB" : : "r"(r0), "r"(r1) : "memory");
  for (;;) {
  }
}
