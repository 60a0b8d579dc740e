/**
 * The grammar of the environment variables that set a V8 flag at start-up
 * (`FLEET_HEAP_GROWTH_PERCENT`, `FLEET_V8_INLINING_BUDGET`): a non-negative integer, `0` for V8's
 * own value. One parser, so the variables cannot drift apart in what they accept.
 */

/**
 * The integer `value` holds; undefined (V8 decides) for 0; `fallback` when it is unset, empty or
 * not a non-negative integer: nonsense keeps the default rather than failing a process's start.
 */
export const parse = (value: string | undefined, fallback: number | undefined): number | undefined => {
  if (value === undefined || value.trim() === "") return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0) return fallback
  return n === 0 ? undefined : n
}
