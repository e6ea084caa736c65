// google.protobuf.Struct / Value <-> plain JSON values, in proto-loader's object shape.

/**
 * A plain JSON object as a Struct object (`{fields: {...}}`).
 *
 * @param {Record<string, unknown>} object A JSON object; undefined members are dropped.
 * @returns {{fields: Record<string, object>}} The Struct.
 */
export function toStruct(object) {
  const fields = {};
  for (const [key, value] of Object.entries(object ?? {})) {
    if (value !== undefined) fields[key] = toValue(value);
  }
  return { fields };
}

/**
 * A plain JSON value as a Value object (numbers travel as doubles, as in JSON).
 *
 * @param {unknown} value The value; non-finite numbers and non-JSON values become null.
 * @returns {object} The Value with exactly one `kind` arm set.
 */
export function toValue(value) {
  if (value === null || value === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') {
    return Number.isFinite(value) ? { numberValue: value } : { nullValue: 'NULL_VALUE' };
  }
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  if (typeof value === 'object') return { structValue: toStruct(value) };
  return { nullValue: 'NULL_VALUE' };
}

/**
 * A Struct object as a plain JSON object; a missing or malformed Struct reads as `{}`.
 *
 * @param {object | null | undefined} struct The Struct as proto-loader decoded it.
 * @returns {Record<string, unknown>} The object.
 */
export function fromStruct(struct) {
  const out = {};
  const fields = struct?.fields;
  if (fields === null || typeof fields !== 'object') return out;
  for (const [key, value] of Object.entries(fields)) out[key] = fromValue(value);
  return out;
}

/**
 * A Value object as a plain JSON value; an unset or unknown arm reads as null.
 *
 * @param {object | null | undefined} value The Value as proto-loader decoded it.
 * @returns {unknown} The JSON value.
 */
export function fromValue(value) {
  switch (value?.kind) {
    case 'numberValue':
      return value.numberValue;
    case 'stringValue':
      return value.stringValue;
    case 'boolValue':
      return value.boolValue;
    case 'structValue':
      return fromStruct(value.structValue);
    case 'listValue':
      return (value.listValue?.values ?? []).map(fromValue);
    default:
      return null;
  }
}
