/* hwfarm_report: the result protocol's emitter for firmware under test
   (hwfarm's docs/protocol.md). A firmware reports its test cases and
   outputs on its console through it; hwfarm reads them back exactly.

   C99, freestanding: no libc, no heap, no printf, no floating-point
   library (floats are formatted from their bits). Output goes one byte at a
   time to a putc callback, a UART's transmit routine say. Not reentrant:
   one report per console, written from one context.

     static void out(void* user, char c) { (void)user; uart_putc(c); }
     hwfarm_report r;
     hwfarm_init(&r, out, 0, HWFARM_V2);
     hwfarm_begin(&r, "my-suite");
     hwfarm_test(&r, "conv", HWFARM_PASS, 0);
     hwfarm_output_f32(&r, "conv", "y", y, 1000); (pieces of at most 128 values)
     hwfarm_end(&r, hwfarm_failed(&r));

   Names (suite, case, output) are 1 to 256 printable ASCII bytes without a
   blank; a case name may hold dots, an output name may not. */
#ifndef HWFARM_REPORT_H
#define HWFARM_REPORT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes one byte to the console. `user` is what hwfarm_init was given. */
typedef void (*hwfarm_putc_fn)(void* user, char c);

typedef enum { HWFARM_PASS, HWFARM_FAIL, HWFARM_SKIP } hwfarm_verdict;

/* An output's element type. HWFARM_F32X is an f32 written as its bit pattern
   (eight hex digits): shorter to print, for outputs of many values. */
typedef enum { HWFARM_F32, HWFARM_F32X, HWFARM_I8, HWFARM_U8, HWFARM_I16, HWFARM_I32 } hwfarm_dtype;

/* The protocol version spoken. Version 2 (every record carries its CRC-32,
   END counts the records before it, so a record lost on the way is noticed)
   is what every hwfarmd that ships this library reads. Version 1 is for an
   older hwfarmd: without CRCs, or with them. */
typedef enum { HWFARM_V2 = 0, HWFARM_V1 = 1, HWFARM_V1_CRC = 2 } hwfarm_mode;

/* How many values an OUTPUT record holds at most: a larger output goes in
   pieces at their @offset. 128 keeps every line under the protocol's 4,096
   bytes with names of 256 bytes. A report's values_per_record may be lowered
   after hwfarm_init. */
#ifndef HWFARM_VALUES_PER_RECORD
#define HWFARM_VALUES_PER_RECORD 128
#endif

/* A report in progress. Set up by hwfarm_init; its fields are the library's. */
typedef struct hwfarm_report {
  hwfarm_putc_fn putc;
  void* user;
  hwfarm_mode mode;
  uint32_t values_per_record;
  uint32_t crc;        /* of the record being written */
  int in_record;       /* a record's line is open */
  uint32_t records;    /* records written since hwfarm_begin: END's records=<n> */
  int failed;          /* a FAIL was reported */
  /* The output being written value by value. */
  const char* case_name;
  const char* output_name;
  hwfarm_dtype dtype;
  uint32_t count;
  uint32_t written;
} hwfarm_report;

void hwfarm_init(hwfarm_report* r, hwfarm_putc_fn putc, void* user, hwfarm_mode mode);

/* HWFARM BEGIN [v=2] suite=<suite>. Starts the record count. */
void hwfarm_begin(hwfarm_report* r, const char* suite);

/* HWFARM TEST <case_name> PASS|FAIL|SKIP [message]. `message` may be null;
   a line end or control byte in it is written as a blank. */
void hwfarm_test(hwfarm_report* r, const char* case_name, hwfarm_verdict verdict, const char* message);

/* An output whose values are in an array: <case_name>.<output>, `count`
   values, in as many records as it takes. */
void hwfarm_output_f32(hwfarm_report* r, const char* case_name, const char* output, const float* values,
                       uint32_t count);
void hwfarm_output_f32x(hwfarm_report* r, const char* case_name, const char* output, const float* values,
                        uint32_t count);
void hwfarm_output_i8(hwfarm_report* r, const char* case_name, const char* output, const int8_t* values,
                      uint32_t count);
void hwfarm_output_u8(hwfarm_report* r, const char* case_name, const char* output, const uint8_t* values,
                      uint32_t count);
void hwfarm_output_i16(hwfarm_report* r, const char* case_name, const char* output, const int16_t* values,
                       uint32_t count);
void hwfarm_output_i32(hwfarm_report* r, const char* case_name, const char* output, const int32_t* values,
                       uint32_t count);

/* An output written value by value, as it is computed: hwfarm_output_start,
   then exactly `count` calls of hwfarm_value_f32 (f32, f32x) or
   hwfarm_value_int (i8, u8, i16, i32; a value out of the dtype's range is
   written as it is, and hwfarm reports it). The names must stay valid until
   the last value. Values past `count` are dropped; any other record written
   before the last value leaves the output incomplete (hwfarm reports that). */
void hwfarm_output_start(hwfarm_report* r, const char* case_name, const char* output, hwfarm_dtype dtype,
                         uint32_t count);
void hwfarm_value_f32(hwfarm_report* r, float value);
void hwfarm_value_int(hwfarm_report* r, int32_t value);

/* HWFARM END status=<status> [records=<n>]: the run is over. */
void hwfarm_end(hwfarm_report* r, int status);

/* A FAIL was reported: a status for hwfarm_end. */
int hwfarm_failed(const hwfarm_report* r);

/* The text forms the report writes, for a firmware's own use. `out` holds
   at least 16 bytes; each returns the length written (a 0 byte follows).
   hwfarm_format_f32 writes what printf("%.9g") writes: strtof reads every
   float back bit for bit ("nan", "inf", "-0" included). */
int hwfarm_format_f32(float value, char* out);
int hwfarm_format_hex32(uint32_t value, char* out); /* eight lowercase hex digits */
int hwfarm_format_int(int32_t value, char* out);

/* CRC-32 (IEEE 802.3, zlib's crc32()) of `n` bytes, as the CRC suffix of a
   record has it: hwfarm_crc32(0, s, n) for the whole of `s`; the CRC of more
   bytes continues from the CRC of the first ones. */
uint32_t hwfarm_crc32(uint32_t crc, const char* data, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif
