/**
 * How objects are transformed between the API and the store: the hook for encryption at rest
 * (DESIGN §10). A transformer sees the serialized object of one resource and may replace it
 * with an envelope (e.g. AES-256-GCM for Secrets); `fromStore` must undo it. Both are
 * synchronous because they sit on the watch cache's hot path; the daemon implements them with
 * the platform's crypto, core only defines the port.
 */
import type { Resource } from "./Registry.js"

/** Encode and decode stored values of a resource. */
export interface Transformer {
  readonly toStore: (resource: Pick<Resource, "group" | "plural">, text: string) => string
  /** Undo `toStore`; throws only for data that cannot be read (a corrupt or foreign envelope). */
  readonly fromStore: (resource: Pick<Resource, "group" | "plural">, text: string) => string
}

/** Store values as they are. */
export const identity: Transformer = { toStore: (_r, text) => text, fromStore: (_r, text) => text }
