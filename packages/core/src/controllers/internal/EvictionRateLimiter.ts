/**
 * The token bucket that paces taint-based eviction per zone, as the node lifecycle controller's
 * `RateLimitedTimedQueue` does upstream: each zone may taint (and so evict) one more node every
 * `1 / qps` seconds, with a burst of one. A rate of 0 never accepts (the zone is in partial
 * disruption in a small cluster, or every zone is fully disrupted). Pure given the time: every
 * function takes `nowMs` and answers a new bucket, so the controller decides on values and keeps
 * only the newest bucket per zone.
 */

/** One zone's bucket. */
export interface Bucket {
  /** Tokens added per second; 0 accepts nothing. */
  readonly qps: number
  /** Most tokens held at once (upstream: 1). */
  readonly burst: number
  /** Tokens held at `atMs`. */
  readonly tokens: number
  /** When `tokens` was last brought up to date. */
  readonly atMs: number
}

/** Upstream's `EvictionRateLimiterBurst`. */
export const defaultBurst = 1

/** A full bucket (a new limiter lets one node through at once, as client-go's token bucket). */
export const make = (qps: number, nowMs: number, burst: number = defaultBurst): Bucket => ({ qps, burst, tokens: qps > 0 ? burst : 0, atMs: nowMs })

/** The bucket refilled up to `nowMs`. */
const refill = (b: Bucket, nowMs: number): Bucket => {
  if (b.qps <= 0 || nowMs <= b.atMs) return b
  return { ...b, tokens: Math.min(b.burst, b.tokens + ((nowMs - b.atMs) / 1000) * b.qps), atMs: nowMs }
}

/** Whether a token is available at `nowMs` (without taking it). */
export const canAccept = (b: Bucket, nowMs: number): boolean => b.qps > 0 && refill(b, nowMs).tokens >= 1

/** Take a token if one is available: the answer says whether it was, and the bucket after. */
export const tryAccept = (b: Bucket, nowMs: number): { readonly accepted: boolean; readonly bucket: Bucket } => {
  const r = refill(b, nowMs)
  if (r.qps <= 0 || r.tokens < 1) return { accepted: false, bucket: r }
  return { accepted: true, bucket: { ...r, tokens: r.tokens - 1 } }
}

/** Milliseconds until a token is available (0 when one is), undefined when none ever will be. */
export const msUntilToken = (b: Bucket, nowMs: number): number | undefined => {
  if (b.qps <= 0) return undefined
  const r = refill(b, nowMs)
  return r.tokens >= 1 ? 0 : Math.ceil(((1 - r.tokens) / r.qps) * 1000)
}

/**
 * The bucket at a new rate (upstream `SwapLimiter`): unchanged when the rate is the same; a new
 * full bucket otherwise, drained at once when the old one had no token to give, so that
 * switching rates cannot let an extra node through.
 */
export const swap = (b: Bucket, qps: number, nowMs: number): Bucket => {
  if (b.qps === qps) return b
  const fresh = make(qps, nowMs, b.burst)
  if (qps <= 0 || canAccept(b, nowMs)) return fresh
  return { ...fresh, tokens: fresh.tokens - 1 }
}
