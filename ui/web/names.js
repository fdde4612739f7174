// Artifact names as hwfarmd makes them (daemon/core/run/naming.h): every
// byte outside [0-9A-Za-z_] becomes "_", runs of "_" become one, leading
// and trailing "_" go.
export function normalizeName(name, fallback = "unnamed") {
  const bytes = new TextEncoder().encode(name);
  let out = "";
  for (const b of bytes) {
    const c = String.fromCharCode(b);
    out += /[0-9A-Za-z_]/.test(c) && b < 128 ? c : "_";
  }
  out = out.replace(/_+/g, "_").replace(/^_|_$/g, "");
  return out || fallback;
}

// "outputs/<image>__<target>/<case>.<output>.npy" for an output key
// "<case>.<output>" (split at the last ".").
export function outputPath(image, target, key) {
  const dot = key.lastIndexOf(".");
  const kase = dot < 0 ? key : key.slice(0, dot), out = dot < 0 ? "" : key.slice(dot + 1);
  return `outputs/${image}__${target}/${normalizeName(kase, "case")}.${normalizeName(out, "output")}.npy`;
}

// A history file's name in the bucket: "<image>__<case>.<output>.json"
// (RunIndex::historyFileName).
export function historyFileName(image, key) {
  const dot = key.lastIndexOf(".");
  const kase = dot < 0 ? key : key.slice(0, dot), out = dot < 0 ? "" : key.slice(dot + 1);
  return `${normalizeName(image, "image")}__${normalizeName(kase, "case")}.${normalizeName(out, "output")}.json`;
}
