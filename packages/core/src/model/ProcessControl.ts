/**
 * The `fleet.koder.dev/v1` `ProcessControl` kind: a namespace's consent that people holding the
 * `exec` or `signal` verbs may reach into the processes of its pods.
 *
 * RBAC says who may ask; this object says that the namespace's owner agreed to be asked at all.
 * Both are needed (and the admission chain must let the request through): a cluster operator
 * granted `exec` everywhere still cannot open a shell in a customer's pod unless the customer's
 * namespace holds a ProcessControl that covers the pod. Without one, `pods/exec`, `pods/attach`,
 * `pods/portforward` and `pods/signal` answer 403 naming the missing consent.
 *
 *   spec.podSelector  which pods (absent or `{}`: every pod in the namespace)
 *   spec.exec         whether commands may run in them, and `attach` reach them (default true)
 *   spec.portForward  whether their ports may be forwarded (default true)
 *   spec.signal       whether signals may be sent to them (default true)
 *   spec.signals      which signals (absent: any of the names below)
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import * as LabelSelectorModule from "./LabelSelector.js"
import { ObjectMeta } from "./Meta.js"

/** The signals `pods/signal` can send, by their POSIX names. */
export const SignalNames = ["SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGWINCH"] as const

/** What a ProcessControl allows. */
export const ProcessControlSpec = Schema.Struct({
  podSelector: optional(LabelSelectorModule.LabelSelector),
  exec: optional(Schema.Boolean),
  /** Whether ports of the pods may be forwarded (`kubectl port-forward`; default true). */
  portForward: optional(Schema.Boolean),
  signal: optional(Schema.Boolean),
  signals: optional(Schema.Array(Schema.String))
})

/** The `ProcessControl` kind (namespaced). */
export const ProcessControl = Schema.Struct({
  apiVersion: Schema.Literal("fleet.koder.dev/v1"),
  kind: Schema.Literal("ProcessControl"),
  metadata: ObjectMeta,
  spec: optional(ProcessControlSpec)
})

/** A ProcessControl object. */
export type ProcessControl = typeof ProcessControl.Type

/** Field errors of a ProcessControl (unknown signal names). */
export const validate = (pc: ProcessControl): ReadonlyArray<FieldError.FieldError> =>
  (pc.spec?.signals ?? []).flatMap((s, i) =>
    (SignalNames as ReadonlyArray<string>).includes(s) ? [] : [FieldError.notSupported(`spec.signals[${i}]`, s, SignalNames)]
  )

/** What is being asked of a pod's processes. */
export type Action = { readonly _tag: "exec" } | { readonly _tag: "portforward" } | { readonly _tag: "signal"; readonly signal: string }

/**
 * Whether some ProcessControl among `consents` (the namespace's) covers `action` on a pod with
 * `podLabels` (pure). Undecodable objects never consent.
 */
export const permits = (consents: ReadonlyArray<unknown>, podLabels: Readonly<Record<string, string>>, action: Action): boolean =>
  consents.some((raw) => {
    const decoded = Schema.decodeUnknownOption(ProcessControl)(raw)
    if (decoded._tag === "None") return false
    const spec = decoded.value.spec ?? {}
    if (!LabelSelectorModule.matches(spec.podSelector ?? {}, podLabels)) return false
    if (action._tag === "exec") return spec.exec ?? true
    if (action._tag === "portforward") return spec.portForward ?? true
    if (!(spec.signal ?? true)) return false
    return spec.signals === undefined || spec.signals.includes(action.signal)
  })
