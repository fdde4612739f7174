/* Exact text forms of an f32 (docs/protocol.md, "Values round-trip
   exactly"). No libc: the test firmware has no printf. */
#include "hw.h"

static uint32_t bits_of(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  return v.u;
}

int format_hex32(uint32_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xFu];
  out[8] = 0;
  return 8;
}

int format_f32x(float f, char* out) { return format_hex32(bits_of(f), out); }

static int put_str(char* out, int n, const char* s) {
  while (*s) out[n++] = *s++;
  return n;
}

/* The float m * 2^e2 as decimal digits d[0..] (least significant first),
   exactly: value = digits * 10^*e10. Returns the number of digits. A float
   needs at most 113 (2^24 * 5^149) of the `cap`. */
static int exact_digits(uint32_t m, int e2, unsigned char* d, int cap, int* e10) {
  int n = 0;
  do {
    d[n++] = (unsigned char)(m % 10);
    m /= 10;
  } while (m);
  unsigned factor = e2 > 0 ? 2 : 5; /* m * 2^-k = m * 5^k / 10^k */
  *e10 = e2 > 0 ? 0 : e2;
  for (int k = e2 > 0 ? e2 : -e2; k > 0; --k) {
    unsigned carry = 0;
    for (int i = 0; i < n; ++i) {
      unsigned v = d[i] * factor + carry;
      d[i] = (unsigned char)(v % 10);
      carry = v / 10;
    }
    if (carry && n < cap) d[n++] = (unsigned char)carry;
  }
  return n;
}

/* A finite nonzero float of exponent field `exp` and mantissa `mant`, in
   %.9g form, at out[n]. Returns the new length. */
static int put_decimal(char* out, int n, uint32_t exp, uint32_t mant) {
  unsigned char d[120];
  int e10 = 0;
  int len = exact_digits(exp ? mant | 0x800000u : mant, exp ? (int)exp - 150 : -149, d, (int)sizeof d, &e10);
  int x = e10 + len - 1; /* the decimal exponent of the first digit */
  /* Round to 9 significant digits, half to even, on the exact value. */
  char s[9];
  if (len > 9) {
    int cut = len - 9; /* d[cut..len-1] are kept */
    int rest = 0;
    for (int i = 0; i < cut - 1; ++i) rest |= d[i];
    unsigned first = d[cut - 1];
    int up = first > 5 || (first == 5 && (rest || (d[cut] & 1)));
    for (int i = cut; up && i < len; ++i) {
      up = d[i] == 9;
      d[i] = up ? 0 : (unsigned char)(d[i] + 1);
    }
    if (up) { /* 999999999 became 1000000000 */
      d[len - 1] = 1;
      ++x;
    }
    for (int i = 0; i < 9; ++i) s[i] = (char)('0' + d[len - 1 - i]);
  } else {
    for (int i = 0; i < 9; ++i) s[i] = (char)('0' + (i < len ? d[len - 1 - i] : 0));
  }
  int digits = 9;
  while (digits > 1 && s[digits - 1] == '0') --digits;

  /* %g: exponential when the exponent is below -4 or at least the precision
     (a float's is within -45..38: two digits). */
  if (x < -4 || x >= 9) {
    out[n++] = s[0];
    if (digits > 1) out[n++] = '.';
    for (int i = 1; i < digits; ++i) out[n++] = s[i];
    out[n++] = 'e';
    out[n++] = x < 0 ? '-' : '+';
    int ax = x < 0 ? -x : x;
    out[n++] = (char)('0' + ax / 10);
    out[n++] = (char)('0' + ax % 10);
  } else if (x >= 0) {
    for (int i = 0; i <= x; ++i) out[n++] = i < digits ? s[i] : '0';
    if (digits > x + 1) out[n++] = '.';
    for (int i = x + 1; i < digits; ++i) out[n++] = s[i];
  } else {
    out[n++] = '0';
    out[n++] = '.';
    for (int i = -1; i > x; --i) out[n++] = '0';
    for (int i = 0; i < digits; ++i) out[n++] = s[i];
  }
  return n;
}

int format_f32(float f, char* out) {
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
