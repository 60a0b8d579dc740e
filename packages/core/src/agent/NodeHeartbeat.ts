/**
 * The node's registration and heartbeat (the kubelet's node status and lease controllers):
 * register the Node (or take over an existing one's labels) until the API answers, then renew
 * the Lease every `leaseRenewMs` and write the Node status when it changed, or at least every
 * `nodeStatusReportMs`. A Node deleted by an administrator is registered again.
 */
import { Clock, Duration, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type * as Conditions from "../object/Conditions.js"
import type { JsonObject } from "../object/Json.js"
import { uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as NodeStatus from "./NodeStatus.js"
import type * as RuntimeCapabilities from "./RuntimeCapabilities.js"

/** What the heartbeat needs. */
export interface Deps {
  readonly client: Client.Client
  readonly runtime: Runtime.RuntimeService
  readonly capabilities: RuntimeCapabilities.RuntimeCapabilities
  readonly facts: NodeStatus.Facts
  readonly allowUnenforcedLimits: boolean
  readonly nodeStatusReportMs: number
}

/** The Node's uid once registered, and the status last written and when. */
export interface State {
  nodeUid: string | undefined
  lastReportMs: number
  reported: NodeStatus.Status | undefined
}

/** A node's heartbeat. */
export interface NodeHeartbeat {
  readonly state: State
  /** Create the Node (or label an existing one) and write its status. */
  readonly register: Effect.Effect<void, ApiError.ApiError>
  /** Write the Node status when it changed or is due; registers again when the Node is gone. */
  readonly reportStatus: Effect.Effect<void>
  /** Renew the Lease, creating it when it is gone. */
  readonly renewLease: Effect.Effect<void>
  /** Register (retrying every second), then renew and report forever with `every`. */
  readonly run: (leaseRenewMs: number, every: (ms: number, effect: Effect.Effect<unknown, unknown>) => Effect.Effect<unknown>) => Effect.Effect<void>
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/** The runtime's health for the Node's conditions. */
export const health = (deps: Pick<Deps, "runtime" | "capabilities" | "allowUnenforcedLimits">): Effect.Effect<NodeStatus.Health> =>
  Effect.map(Effect.either(deps.runtime.info), (info): NodeStatus.Health => {
    // The LimitsEnforced condition: from the runtime's answer, or what it said before it went down.
    const caps = info._tag === "Right" ? info.right.capabilities : deps.capabilities.last()
    const limits = caps === undefined ? {} : { limits: { cpu: caps.limits.cpu, memory: caps.limits.memory, allowUnenforced: deps.allowUnenforcedLimits } }
    return info._tag === "Right" ? { runtimeReady: true, ...limits } : { runtimeReady: false, message: `container runtime is down: ${info.left.message}`, ...limits }
  })

/** The heartbeat of `deps.facts.nodeName`. */
export const make = (deps: Deps, state: State = { nodeUid: undefined, lastReportMs: 0, reported: undefined }): NodeHeartbeat => {
  const { client, facts } = deps
  const nodeName = facts.nodeName
  const nodeHealth = health(deps)

  const register = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const h = yield* nodeHealth
    const object = NodeStatus.nodeObject(facts, h, now)
    const { status: _status, ...withoutStatus } = object
    const created = yield* Effect.either(client.create(withoutStatus))
    let node: JsonObject
    if (created._tag === "Right") node = created.right
    else if (created.left.status.code === 409) {
      node = yield* client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { metadata: { labels: NodeStatus.labelsOf(facts), ...(facts.annotations === undefined ? {} : { annotations: facts.annotations }) } })
    } else return yield* Effect.fail(created.left)
    state.nodeUid = uidOf(node)
    // The API's condition types are the model's; the agent's own are a subset of their values.
    const previous = Views.node(node).status?.conditions as ReadonlyArray<Conditions.Condition> | undefined
    const status = NodeStatus.statusOf(facts, h, previous, now)
    yield* client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { status }, "status")
    state.reported = status
    state.lastReportMs = now
  })

  const reportStatus = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const next = NodeStatus.statusOf(facts, yield* nodeHealth, state.reported?.conditions, now)
    if (!NodeStatus.reportDue(state.reported, next, state.lastReportMs, now, deps.nodeStatusReportMs)) return
    const result = yield* Effect.either(client.patch(ResourceRefs.Node, undefined, nodeName, "merge", { status: next }, "status"))
    if (result._tag === "Left") {
      // The node object is gone (deleted by an administrator): register again, as the kubelet does.
      if (isNotFound(result.left)) yield* Effect.ignore(register)
      return
    }
    state.reported = next
    state.lastReportMs = now
  })

  const renewLease = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const lease = NodeStatus.leaseObject(nodeName, state.nodeUid, now)
    const renewed = yield* Effect.either(client.patch(ResourceRefs.Lease, NodeStatus.leaseNamespace, nodeName, "merge", { spec: lease["spec"] }))
    if (renewed._tag === "Left" && isNotFound(renewed.left)) yield* Effect.ignore(client.create(lease))
  })

  // Registration retries until the API answers (it may start after the agent).
  const run: NodeHeartbeat["run"] = (leaseRenewMs, every) =>
    Effect.gen(function* () {
      for (;;) {
        const ok = yield* Effect.either(register)
        if (ok._tag === "Right") break
        yield* Effect.sleep(Duration.millis(1_000))
      }
      yield* every(leaseRenewMs, renewLease)
      yield* every(Math.min(10_000, leaseRenewMs), reportStatus)
    })

  return { state, register, reportStatus, renewLease, run }
}
