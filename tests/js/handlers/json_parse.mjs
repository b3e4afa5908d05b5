// JSON.parse of header values (the JSON field binding's read side), tagged so that what JSON
// cannot carry back survives the bridge: -0, Infinity, number text as String(n), key/value pairs.
function tag(v) {
  if (v === null || typeof v === 'boolean') return v;
  if (typeof v === 'number') return { n: Object.is(v, -0) ? '-0' : String(v) };
  if (typeof v === 'string') return { s: v };
  if (Array.isArray(v)) return { a: v.map(tag) };
  return { o: Object.entries(v).map(([k, x]) => [k, tag(x)]) };
}

// texts arrive JSON-encoded (ASCII) so lone surrogates cross the bridge intact.
export async function parseMany({ textsJson }) {
  return JSON.parse(textsJson).map((text) => {
    try {
      return { ok: true, value: tag(JSON.parse(text)) };
    } catch {
      return { ok: false };
    }
  });
}
