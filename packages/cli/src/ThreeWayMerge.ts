/**
 * `kubectl apply`'s three-way merge, as a JSON Merge Patch (RFC 7386) computed from:
 *
 *   original  what the user applied last time (the `last-applied-configuration` annotation)
 *   desired   what the user applies now
 *   live      the object on the server (with defaults and other writers' fields)
 *
 * A field is set when the desired value is not already "contained" in the live one — live may
 * carry more (server defaults such as a container's `imagePullPolicy`, other writers' labels), so
 * a re-apply of the same file patches nothing and says `unchanged`. A field is removed (`null`)
 * when the last apply had it and this one does not: fields nobody applied are never removed.
 * Lists are atomic, as in a merge patch: a list that changed is sent whole (the server defaults
 * its elements again); one whose elements each contain the desired ones is left alone. `status`
 * is never applied (the server ignores it on the main resource).
 */

type Json = Record<string, unknown>

/** The annotation holding the last applied configuration. */
export const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Whether `live` already says everything `desired` says (extra fields in live are allowed). */
export const contains = (live: unknown, desired: unknown): boolean => {
  if (isObject(desired)) return isObject(live) && Object.entries(desired).every(([k, v]) => (v === null ? live[k] === undefined || live[k] === null : contains(live[k], v)))
  if (Array.isArray(desired)) return Array.isArray(live) && live.length === desired.length && desired.every((d, i) => contains(live[i], d))
  return live === desired
}

/** The merge patch turning `live` into what `desired` asks for, given the `original` apply (pure). */
export const patch = (original: Json | undefined, desired: Json, live: Json): Json => {
  const out: Json = {}
  for (const [key, want] of Object.entries(desired)) {
    const have = live[key]
    const before = original?.[key]
    if (isObject(want) && isObject(have)) {
      const sub = patch(isObject(before) ? before : undefined, want, have)
      if (Object.keys(sub).length > 0) out[key] = sub
    } else if (!contains(have, want)) out[key] = want
  }
  if (original !== undefined) {
    for (const key of Object.keys(original)) if (!(key in desired) && live[key] !== undefined) out[key] = null
  }
  return out
}

/** The desired object with its own last-applied annotation set, as `kubectl apply` stores it (pure). */
export const withLastApplied = (desired: Json): Json => {
  const meta = isObject(desired["metadata"]) ? desired["metadata"] : {}
  const annotations = isObject(meta["annotations"]) ? { ...meta["annotations"] } : {}
  delete annotations[lastAppliedAnnotation]
  const stripped = { ...desired, metadata: { ...meta, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) } }
  if (Object.keys(annotations).length === 0) delete (stripped.metadata as Json)["annotations"]
  return { ...desired, metadata: { ...meta, annotations: { ...annotations, [lastAppliedAnnotation]: `${JSON.stringify(stripped)}\n` } } }
}

/** The last applied configuration recorded on a live object, if any (pure). */
export const lastApplied = (live: Json): Json | undefined => {
  const meta = isObject(live["metadata"]) ? live["metadata"] : {}
  const text = isObject(meta["annotations"]) ? meta["annotations"][lastAppliedAnnotation] : undefined
  if (typeof text !== "string") return undefined
  try {
    const parsed = JSON.parse(text) as unknown
    return isObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

/** The patch `apply` sends: desired (with its annotation) against live, status left out (pure). */
export const applyPatch = (desired: Json, live: Json): Json => {
  const { status: _status, ...want } = withLastApplied(desired)
  const original = lastApplied(live)
  return patch(original, want, live)
}
