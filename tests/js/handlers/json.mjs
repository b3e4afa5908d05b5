// JSON.stringify of values (the JSON field binding of the codec headers).
export async function stringifyMany({ values }) {
  return values.map((v) => JSON.stringify(v));
}
