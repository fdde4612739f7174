/* hwfarm_report: the result protocol's emitter (hwfarm_report.h). */
#include "hwfarm_report.h"

/* --- text forms ------------------------------------------------------------ */

static uint32_t bits_of(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  return v.u;
}

int hwfarm_format_hex32(uint32_t v, char* out) {
  int i;
  for (i = 0; i < 8; ++i) out[i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xFu];
  out[8] = 0;
  return 8;
}

int hwfarm_format_int(int32_t v, char* out) {
  char digits[11];
  int n = 0, len = 0;
  uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
  do {
    digits[n++] = (char)('0' + u % 10u);
    u /= 10u;
  } while (u);
  if (v < 0) out[len++] = '-';
  while (n) out[len++] = digits[--n];
  out[len] = 0;
  return len;
}

static int put_str(char* out, int n, const char* s) {
  while (*s) out[n++] = *s++;
  return n;
}

/* The float m * 2^e2 as decimal digits d[0..] (least significant first),
   exactly: value = digits * 10^*e10. Returns the number of digits. A float
   needs at most 113 (2^24 * 5^149) of the `cap`. */
static int exact_digits(uint32_t m, int e2, unsigned char* d, int cap, int* e10) {
  int n = 0, k, i;
  unsigned factor = e2 > 0 ? 2u : 5u; /* m * 2^-k = m * 5^k / 10^k */
  do {
    d[n++] = (unsigned char)(m % 10u);
    m /= 10u;
  } while (m);
  *e10 = e2 > 0 ? 0 : e2;
  for (k = e2 > 0 ? e2 : -e2; k > 0; --k) {
    unsigned carry = 0;
    for (i = 0; i < n; ++i) {
      unsigned v = d[i] * factor + carry;
      d[i] = (unsigned char)(v % 10u);
      carry = v / 10u;
    }
    if (carry && n < cap) d[n++] = (unsigned char)carry;
  }
  return n;
}

/* A finite nonzero float of exponent field `exp` and mantissa `mant`, in
   %.9g form, at out[n]. Returns the new length. */
static int put_decimal(char* out, int n, uint32_t exp, uint32_t mant) {
  unsigned char d[120];
  char s[9];
  int e10 = 0, i, digits = 9;
  int len = exact_digits(exp ? mant | 0x800000u : mant, exp ? (int)exp - 150 : -149, d, (int)sizeof d, &e10);
  int x = e10 + len - 1; /* the decimal exponent of the first digit */
  /* Round to 9 significant digits, half to even, on the exact value. */
  if (len > 9) {
    int cut = len - 9; /* d[cut..len-1] are kept */
    int rest = 0, up;
    unsigned first = d[cut - 1];
    for (i = 0; i < cut - 1; ++i) rest |= d[i];
    up = first > 5u || (first == 5u && (rest || (d[cut] & 1u)));
    for (i = cut; up && i < len; ++i) {
      up = d[i] == 9;
      d[i] = up ? 0 : (unsigned char)(d[i] + 1);
    }
    if (up) { /* 999999999 became 1000000000 */
      d[len - 1] = 1;
      ++x;
    }
    for (i = 0; i < 9; ++i) s[i] = (char)('0' + d[len - 1 - i]);
  } else {
    for (i = 0; i < 9; ++i) s[i] = (char)('0' + (i < len ? d[len - 1 - i] : 0));
  }
  while (digits > 1 && s[digits - 1] == '0') --digits;

  /* %g: exponential when the exponent is below -4 or at least the precision
     (a float's is within -45..38: two digits). */
  if (x < -4 || x >= 9) {
    int ax = x < 0 ? -x : x;
    out[n++] = s[0];
    if (digits > 1) out[n++] = '.';
    for (i = 1; i < digits; ++i) out[n++] = s[i];
    out[n++] = 'e';
    out[n++] = x < 0 ? '-' : '+';
    out[n++] = (char)('0' + ax / 10);
    out[n++] = (char)('0' + ax % 10);
  } else if (x >= 0) {
    for (i = 0; i <= x; ++i) out[n++] = i < digits ? s[i] : '0';
    if (digits > x + 1) out[n++] = '.';
    for (i = x + 1; i < digits; ++i) out[n++] = s[i];
  } else {
    out[n++] = '0';
    out[n++] = '.';
    for (i = -1; i > x; --i) out[n++] = '0';
    for (i = 0; i < digits; ++i) out[n++] = s[i];
  }
  return n;
}

int hwfarm_format_f32(float f, char* out) {
  uint32_t u = bits_of(f);
  uint32_t exp = (u >> 23) & 0xFFu, mant = u & 0x7FFFFFu;
  int n = 0;
  if (exp == 0xFFu && mant) {
    n = put_str(out, n, "nan");
  } else {
    if (u >> 31) out[n++] = '-';
    if (exp == 0xFFu) n = put_str(out, n, "inf");
    else if (exp == 0 && mant == 0) n = put_str(out, n, "0");
    else n = put_decimal(out, n, exp, mant);
  }
  out[n] = 0;
  return n;
}

/* --- CRC ------------------------------------------------------------------- */

/* One byte into a running (inverted) CRC-32, bit by bit: no table. */
static uint32_t crc_byte(uint32_t c, char byte) {
  int k;
  c ^= (unsigned char)byte;
  for (k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  return c;
}

uint32_t hwfarm_crc32(uint32_t crc, const char* data, uint32_t n) {
  uint32_t c = ~crc;
  while (n--) c = crc_byte(c, *data++);
  return ~c;
}

/* --- records ----------------------------------------------------------------- */

static void put(hwfarm_report* r, char c) {
  r->crc = crc_byte(r->crc, c);
  r->putc(r->user, c);
}

static void puts_(hwfarm_report* r, const char* s) {
  while (*s) put(r, *s++);
}

static void put_int(hwfarm_report* r, int32_t v) {
  char text[12];
  hwfarm_format_int(v, text);
  puts_(r, text);
}

static void put_u32(hwfarm_report* r, uint32_t v) {
  char digits[11];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10u);
    v /= 10u;
  } while (v);
  while (n) put(r, digits[--n]);
}

/* Ends the record's line: " *<crc>" first, but in plain version 1. */
static void close_record(hwfarm_report* r) {
  if (!r->in_record) return;
  if (r->mode != HWFARM_V1) {
    char hex[9];
    const char* s = hex;
    hwfarm_format_hex32(~r->crc, hex);
    r->putc(r->user, ' ');
    r->putc(r->user, '*');
    while (*s) r->putc(r->user, *s++);
  }
  r->putc(r->user, '\n');
  r->in_record = 0;
  ++r->records;
}

/* Starts "HWFARM <keyword>", closing a record left open (an output whose
   values stopped coming). */
static void open_record(hwfarm_report* r, const char* keyword) {
  close_record(r);
  r->count = r->written = 0; /* no output is being written any more */
  r->crc = 0xFFFFFFFFu;
  r->in_record = 1;
  puts_(r, "HWFARM ");
  puts_(r, keyword);
}

void hwfarm_init(hwfarm_report* r, hwfarm_putc_fn putc, void* user, hwfarm_mode mode) {
  r->putc = putc;
  r->user = user;
  r->mode = mode;
  r->values_per_record = HWFARM_VALUES_PER_RECORD;
  r->crc = 0xFFFFFFFFu;
  r->in_record = 0;
  r->records = 0;
  r->failed = 0;
  r->case_name = r->output_name = 0;
  r->dtype = HWFARM_F32;
  r->count = r->written = 0;
}

void hwfarm_begin(hwfarm_report* r, const char* suite) {
  close_record(r);
  r->records = 0;
  open_record(r, "BEGIN ");
  if (r->mode == HWFARM_V2) puts_(r, "v=2 ");
  puts_(r, "suite=");
  puts_(r, suite);
  close_record(r);
}

void hwfarm_test(hwfarm_report* r, const char* case_name, hwfarm_verdict verdict, const char* message) {
  open_record(r, "TEST ");
  puts_(r, case_name);
  puts_(r, verdict == HWFARM_PASS ? " PASS" : verdict == HWFARM_FAIL ? " FAIL" : " SKIP");
  if (verdict == HWFARM_FAIL) r->failed = 1;
  if (message && *message) {
    put(r, ' ');
    for (; *message; ++message) put(r, (unsigned char)*message < 0x20 ? ' ' : *message);
  }
  close_record(r);
}

static const char* dtype_name(hwfarm_dtype d) {
  switch (d) {
    case HWFARM_F32: return "f32";
    case HWFARM_F32X: return "f32x";
    case HWFARM_I8: return "i8";
    case HWFARM_U8: return "u8";
    case HWFARM_I16: return "i16";
    case HWFARM_I32: return "i32";
  }
  return "f32";
}

/* "HWFARM OUTPUT <case>.<output> <dtype> <count>", and " @<offset>" when the
   output takes more than one record. */
static void open_piece(hwfarm_report* r) {
  uint32_t count = r->count, written = r->written;
  open_record(r, "OUTPUT ");
  r->count = count;
  r->written = written;
  puts_(r, r->case_name);
  put(r, '.');
  puts_(r, r->output_name);
  put(r, ' ');
  puts_(r, dtype_name(r->dtype));
  put(r, ' ');
  put_u32(r, r->count);
  if (r->count > r->values_per_record) {
    puts_(r, " @");
    put_u32(r, r->written);
  }
}

void hwfarm_output_start(hwfarm_report* r, const char* case_name, const char* output, hwfarm_dtype dtype,
                         uint32_t count) {
  close_record(r);
  if (r->values_per_record == 0) r->values_per_record = 1;
  r->case_name = case_name;
  r->output_name = output;
  r->dtype = dtype;
  r->count = count;
  r->written = 0;
  if (count == 0) { /* a record without values */
    open_piece(r);
    close_record(r);
  }
}

/* Writes the next value's text; opens and closes pieces around it. */
static void put_value(hwfarm_report* r, const char* text) {
  if (r->written >= r->count) return; /* no output is being written */
  if (!r->in_record) open_piece(r);
  put(r, ' ');
  puts_(r, text);
  ++r->written;
  if (r->written == r->count || r->written % r->values_per_record == 0) close_record(r);
  if (r->written == r->count) r->count = r->written = 0;
}

void hwfarm_value_f32(hwfarm_report* r, float value) {
  char text[16];
  if (r->dtype == HWFARM_F32X) hwfarm_format_hex32(bits_of(value), text);
  else if (r->dtype == HWFARM_F32) hwfarm_format_f32(value, text);
  else /* an integer output: the value truncated, within int32_t */
    hwfarm_format_int(value != value              ? 0
                      : value >= 2147483647.0f    ? 2147483647
                      : value <= -2147483648.0f   ? (-2147483647 - 1)
                                                  : (int32_t)value,
                      text);
  put_value(r, text);
}

void hwfarm_value_int(hwfarm_report* r, int32_t value) {
  char text[16];
  if (r->dtype == HWFARM_F32 || r->dtype == HWFARM_F32X) {
    hwfarm_value_f32(r, (float)value);
    return;
  }
  hwfarm_format_int(value, text);
  put_value(r, text);
}

/* hwfarm_output_<name>: an output of `type` values from an array. */
#define OUTPUT_FROM_ARRAY(name, type, dtype, value)                                                       \
  void hwfarm_output_##name(hwfarm_report* r, const char* case_name, const char* output, const type* values, \
                            uint32_t count) {                                                                \
    uint32_t i;                                                                                              \
    hwfarm_output_start(r, case_name, output, dtype, count);                                                 \
    for (i = 0; i < count; ++i) value(r, values[i]);                                                         \
  }

OUTPUT_FROM_ARRAY(f32, float, HWFARM_F32, hwfarm_value_f32)
OUTPUT_FROM_ARRAY(f32x, float, HWFARM_F32X, hwfarm_value_f32)
OUTPUT_FROM_ARRAY(i8, int8_t, HWFARM_I8, hwfarm_value_int)
OUTPUT_FROM_ARRAY(u8, uint8_t, HWFARM_U8, hwfarm_value_int)
OUTPUT_FROM_ARRAY(i16, int16_t, HWFARM_I16, hwfarm_value_int)
OUTPUT_FROM_ARRAY(i32, int32_t, HWFARM_I32, hwfarm_value_int)

void hwfarm_end(hwfarm_report* r, int status) {
  uint32_t records;
  close_record(r);
  records = r->records;
  open_record(r, "END status=");
  put_int(r, (int32_t)status);
  if (r->mode == HWFARM_V2) {
    puts_(r, " records=");
    put_u32(r, records);
  }
  close_record(r);
}

int hwfarm_failed(const hwfarm_report* r) { return r->failed; }
