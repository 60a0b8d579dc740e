/**
 * What the container runtime can do (images, bind mounts, limits), asked once: a pod's containers
 * are specified for it, admission checks its limits, and the node's LimitsEnforced condition
 * reports them, from the last answer while the runtime is down.
 */
import { Effect } from "effect"
import type * as Runtime from "../runtime/Runtime.js"

/** The runtime's capabilities, asked on first use. */
export interface RuntimeCapabilities {
  /** The capabilities, asking the runtime the first time. */
  readonly get: Effect.Effect<Runtime.Capabilities, Runtime.Unavailable>
  /** The last answer, if the runtime answered once. */
  readonly last: () => Runtime.Capabilities | undefined
}

/** Capabilities of `runtime`, asked once. */
export const make = (runtime: Runtime.RuntimeService): RuntimeCapabilities => {
  const state: { value: Runtime.Capabilities | undefined } = { value: undefined }
  return {
    get: Effect.suspend(() =>
      state.value !== undefined ? Effect.succeed(state.value) : Effect.map(runtime.info, (info) => (state.value = info.capabilities))
    ),
    last: () => state.value
  }
}
