/**
 * DefaultBinder: the Bind plugin that writes the decision through the API's `pods/binding`
 * subresource, as upstream kube-scheduler's `defaultbinder`. The write itself is the runtime's
 * `handle.bindPod` (a compare-and-swap; a conflict comes back as a non-success Status for the
 * framework to retry against a fresh snapshot). Without a binder in the handle, binding answers
 * Error rather than failing to build the profile, so profiles can be built and replayed in tests.
 */
import { Effect } from "effect"
import type { BindPlugin, Factory, Handle, Status } from "../Framework.js"
import { status } from "../Framework.js"

/** The plugin's name in profiles and the registry. */
export const name = "DefaultBinder"

const noBinder: Status = status("Error", "DefaultBinder: the scheduler handle has no bindPod")

/** The plugin, binding through `handle.bindPod`. */
export const make = (handle: Handle): BindPlugin => ({
  name,
  bind: (_state, pod, node) => (handle.bindPod === undefined ? Effect.succeed(noBinder) : handle.bindPod(pod.pod, node))
})

/** Builds the plugin (no arguments). */
export const factory: Factory = (_args, handle) => make(handle)
