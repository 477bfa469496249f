/** Deep merge used for `x-idempotency` defaults: objects merge key by key, anything else (arrays too) replaces. */

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Returns `overlay` deep-merged over `base`; neither input is modified. */
export function deepMerge(base: unknown, overlay: unknown): unknown {
  if (overlay === undefined) return base;
  if (!isPlainObject(base) || !isPlainObject(overlay)) return overlay;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(overlay)) {
    const next = Object.prototype.hasOwnProperty.call(base, key) ? deepMerge(base[key], value) : value;
    // defineProperty, not assignment: a `__proto__` key in a document must stay a plain field.
    Object.defineProperty(merged, key, { value: next, enumerable: true, writable: true, configurable: true });
  }
  return merged;
}
