// NumPy .npy files (format 1.0-3.0, little-endian, C order), as the run's
// outputs/ hold them: f4, i1, u1, i2, i4. Returns {dtype, shape, values}.
const TYPES = {"<f4": Float32Array, "<i4": Int32Array, "<i2": Int16Array, "|i1": Int8Array, "|u1": Uint8Array,
               "<u1": Uint8Array, "<i1": Int8Array, "<f8": Float64Array};

export function parseNpy(buffer) {
  const bytes = new Uint8Array(buffer);
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];
  if (bytes.length < 10 || magic.some((m, i) => bytes[i] !== m)) throw new Error("not a .npy file");
  const major = bytes[6];
  const view = new DataView(buffer);
  const headerLen = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = major === 1 ? 10 : 12;
  const header = new TextDecoder("latin1").decode(bytes.subarray(start, start + headerLen));
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !TYPES[descr[1]]) throw new Error(`unsupported .npy dtype ${descr ? descr[1] : "?"}`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error("Fortran-order .npy is not supported");
  const dims = shape[1].split(",").map(s => s.trim()).filter(Boolean).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const Type = TYPES[descr[1]];
  const offset = start + headerLen;
  const data = buffer.slice(offset, offset + count * Type.BYTES_PER_ELEMENT); // aligned copy
  return {dtype: descr[1], shape: dims, values: new Type(data)};
}
