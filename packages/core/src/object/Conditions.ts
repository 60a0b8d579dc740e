/**
 * Status conditions as Kubernetes keeps them: one entry per `type`; `lastTransitionTime` moves
 * only when `status` changes, so clients can tell how long a state has held; `lastUpdateTime`
 * (where a kind has it) moves on any change of reason or message.
 */

/** A condition as controllers write it. */
export interface Condition {
  readonly type: string
  readonly status: "True" | "False" | "Unknown"
  readonly reason?: string
  readonly message?: string
  readonly lastTransitionTime?: string
  readonly lastUpdateTime?: string
  readonly lastProbeTime?: string
  readonly lastHeartbeatTime?: string
}

/**
 * `conditions` with `next` set at time `now` (RFC 3339). Answers the same array when nothing
 * changed, so callers can skip a write by identity.
 */
export const set = (
  conditions: ReadonlyArray<Condition> | undefined,
  next: Omit<Condition, "lastTransitionTime" | "lastUpdateTime">,
  now: string,
  options: { readonly updateTime?: boolean } = {}
): ReadonlyArray<Condition> => {
  const list = conditions ?? []
  const i = list.findIndex((c) => c.type === next.type)
  const old = i < 0 ? undefined : list[i]
  if (old !== undefined && old.status === next.status && old.reason === next.reason && old.message === next.message) return list
  const merged: Condition = {
    ...next,
    ...(options.updateTime ? { lastUpdateTime: now } : {}),
    lastTransitionTime: old !== undefined && old.status === next.status && old.lastTransitionTime !== undefined ? old.lastTransitionTime : now
  }
  return i < 0 ? [...list, merged] : list.map((c, j) => (j === i ? merged : c))
}

/** The condition of `type`, if present. */
export const get = (conditions: ReadonlyArray<Condition> | undefined, type: string): Condition | undefined =>
  (conditions ?? []).find((c) => c.type === type)

/** `conditions` without `type`. */
export const remove = (conditions: ReadonlyArray<Condition> | undefined, type: string): ReadonlyArray<Condition> =>
  (conditions ?? []).filter((c) => c.type !== type)
