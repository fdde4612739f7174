/* Minimal Cortex-M start-up: vector table, .data/.bss set-up, then main().
   main's return value is reported on the console as `HWFARM END status=<n>`
   (docs/protocol.md); then the firmware resets the core, which stops the
   simulator (hwfarm's simulators run with -no-reboot) and ends the run at
   once.
   There is no semihosting: hwfarm's simulators run without it, and a
   `bkpt` there is a HardFault. */
#include <stdint.h>

#include "hw.h"

extern uint32_t _data_load, _data_start, _data_end, _bss_start, _bss_end, _stack_top;
int main(void);
void reset_handler(void);
void hardfault_handler(void);

static void default_handler(void) {
  for (;;) {
  }
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(&_stack_top), reset_handler, default_handler, hardfault_handler, default_handler,
    default_handler, default_handler, 0, 0, 0, 0, default_handler, default_handler, 0, default_handler,
    default_handler,
};

void reset_handler(void) {
  uint32_t* src = &_data_load;
  for (uint32_t* dst = &_data_start; dst < &_data_end;) *dst++ = *src++;
  for (uint32_t* dst = &_bss_start; dst < &_bss_end;) *dst++ = 0;
  firmware_end(main());
}

void firmware_end(int status) {
  hwfarm_end(&report, status);
#if defined(VARIANT_CTRLEND) || defined(VARIANT_IDLE)
  /* Idles, as a firmware that does not reset: hwfarmd stops its board. */
  for (;;) __asm__ volatile("wfi");
#else
  system_reset();
#endif
}

void system_reset(void) {
  /* SCB->AIRCR = VECTKEY | SYSRESETREQ (the CMSIS NVIC_SystemReset()), once
     the UART took the last byte: a reset loses a byte it still holds (the
     END record's line end, and END is then a cut line, never a record). */
  uart_flush();
  __asm__ volatile("dsb" ::: "memory");
  *(volatile uint32_t*)0xE000ED0Cu = 0x05FA0004u;
  __asm__ volatile("dsb" ::: "memory");
  for (;;) __asm__ volatile("wfi");
}

#if defined(VARIANT_SEMIHOST)
/* A semihosting call without semihosting faults. This variant survives it:
   the HardFault handler steps over the 16-bit `bkpt` and returns -1 in r0,
   as a host that refuses the call would. Other variants lock up here (a
   firmware failure, ended by the deadline). */
void hardfault_c(uint32_t* frame) {
  frame[0] = 0xFFFFFFFFu; /* r0: the call's result */
  frame[6] += 2;          /* pc: past the bkpt */
}

__attribute__((naked)) void hardfault_handler(void) {
  __asm__ volatile(
      "tst lr, #4\n"
      "ite eq\n"
      "mrseq r0, msp\n"
      "mrsne r0, psp\n"
      "push {lr}\n"
      "bl hardfault_c\n"
      "pop {pc}\n");
}
#else
void hardfault_handler(void) { default_handler(); }
#endif
