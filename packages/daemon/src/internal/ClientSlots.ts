/**
 * Per-client in-flight limits: how many non-watch requests and watches one client (its bearer
 * token's hash prefix, or its address) has running, counted before authentication.
 */

/** The counts of every client with something in flight, and their bounds. */
export interface ClientSlots {
  /** Concurrent non-watch requests per client. */
  readonly maxInFlight: number
  /** Concurrent watches per client. */
  readonly maxWatches: number
  /** Clients with at least one request or watch in flight. */
  readonly perClient: Map<string, { requests: number; watches: number }>
}

/** No client has anything in flight yet. */
export const make = (maxInFlight: number, maxWatches: number): ClientSlots => ({ maxInFlight, maxWatches, perClient: new Map() })

/** Take a slot for `client`: its release (idempotent), or undefined when the client is at its bound. */
export const admit = (slots: ClientSlots, client: string, watch: boolean): (() => void) | undefined => {
  const { perClient } = slots
  const count = perClient.get(client) ?? { requests: 0, watches: 0 }
  if (watch ? count.watches >= slots.maxWatches : count.requests >= slots.maxInFlight) return undefined
  if (watch) count.watches++
  else count.requests++
  perClient.set(client, count)
  let released = false
  return () => {
    if (released) return
    released = true
    if (watch) count.watches--
    else count.requests--
    if (count.requests === 0 && count.watches === 0) perClient.delete(client)
  }
}
