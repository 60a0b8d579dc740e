/**
 * The scheduling framework (DESIGN §7), in the shape of Kubernetes' scheduler framework: one
 * small interface per extension point, plugins registered by name in a name → factory map,
 * profiles choosing and weighting them. Verdicts are data — `Unschedulable` is an answer, not a
 * failure — and every point but Bind is a pure function of the pod, the cycle's scratchpad and
 * the snapshot, so a placement can be replayed and explained.
 *
 *   QueueSort ─▶ PreFilter ─▶ Filter (per node) ─▶ PostFilter (preemption, when none fit)
 *             ─▶ PreScore ─▶ Score (per node) ─▶ NormalizeScore ─▶ × weight ─▶ pick
 *             ─▶ Reserve ─▶ Permit ─▶ Bind (the only Effect)     Unreserve on any failure after Reserve
 */
import type { Effect } from "effect"
import type { JsonObject } from "../object/Json.js"
import type { NodeInfo, PodInfo, Snapshot } from "./Snapshot.js"

/** What a plugin answers. */
export type Code =
  /** The pod may go on (this node fits, this step passed). */
  | "Success"
  /** The pod does not fit now; preemption may make room. */
  | "Unschedulable"
  /** The pod does not fit, and preemption cannot change that (node affinity, taints). */
  | "UnschedulableAndUnresolvable"
  /** A PreFilter or PreScore plugin has nothing to do for this pod: skip its later points. */
  | "Skip"
  /** Wait (Permit). */
  | "Wait"
  /** Something is wrong (a malformed object, an internal error); the pod is retried with backoff. */
  | "Error"

/** A verdict with the reasons a user reads (`Insufficient cpu`, `node(s) had untolerated taint {dedicated: gpu}`). */
export interface Status {
  readonly code: Code
  readonly reasons: ReadonlyArray<string>
  /** The plugin that answered (filled in by the framework). */
  readonly plugin?: string
}

/** The success verdict. */
export const success: Status = { code: "Success", reasons: [] }

/** A verdict of `code` with reasons. */
export const status = (code: Code, ...reasons: ReadonlyArray<string>): Status => ({ code, reasons })

/** Whether a verdict lets the pod go on. */
export const isSuccess = (s: Status): boolean => s.code === "Success" || s.code === "Skip"

/** The scratchpad of one scheduling cycle: what PreFilter computed, for Filter to read. */
export class CycleState {
  private readonly data = new Map<string, unknown>()
  /** Plugins whose PreFilter answered Skip (their Filter is not called). */
  readonly skipFilter = new Set<string>()
  /** Plugins whose PreScore answered Skip (their Score is not called). */
  readonly skipScore = new Set<string>()
  /** Write a value under a plugin-chosen key. */
  write(key: string, value: unknown): void {
    this.data.set(key, value)
  }
  /** Read a value written this cycle. */
  read<A>(key: string): A | undefined {
    return this.data.get(key) as A | undefined
  }
}

/** The lowest and highest score a Score plugin may give after normalisation. */
export const MinScore = 0
/** The highest node score. */
export const MaxScore = 100

/** A named plugin; it implements one or more extension points. */
export interface Plugin {
  readonly name: string
  /**
   * Present on plugins whose Filter and Score read only the pod, the cycle state and the one node
   * they are given, never other nodes: what of the pod they read, as a string (upstream's
   * Signature extension point). Consecutive pods whose signatures are equal may reuse a cycle's
   * verdicts and scores on the nodes that have not changed since (opportunistic batching, see
   * `Batch.ts`); a plugin without it stops that unless its PreFilter and PreScore skip the pod.
   */
  readonly sign?: (pod: PodInfo) => string
}

/** Orders the active queue (PrioritySort: higher priority first, then earlier). */
export interface QueueSortPlugin extends Plugin {
  readonly less: (a: QueuedPodInfo, b: QueuedPodInfo) => boolean
}

/** What PreFilter may answer beyond a verdict: the only nodes worth filtering. */
export interface PreFilterResult {
  readonly status: Status
  /** When set, only these nodes are evaluated (NodeName, NodeAffinity on `metadata.name`). */
  readonly nodeNames?: ReadonlySet<string>
}

/** Computes what Filter needs once per cycle; may rule the pod out before any node is looked at. */
export interface PreFilterPlugin extends Plugin {
  readonly preFilter: (state: CycleState, pod: PodInfo, snapshot: Snapshot) => PreFilterResult
}

/** Whether one node can take the pod. */
export interface FilterPlugin extends Plugin {
  readonly filter: (state: CycleState, pod: PodInfo, node: NodeInfo) => Status
}

/** What PostFilter proposes when no node fits: usually preemption of victims on one node. */
export interface PostFilterResult {
  readonly status: Status
  /** The node to nominate (`status.nominatedNodeName`). */
  readonly nominatedNode?: string
  /** Pods to evict so the pod fits there. */
  readonly victims?: ReadonlyArray<PodInfo>
}

/** Runs only when every node was filtered out (preemption). */
export interface PostFilterPlugin extends Plugin {
  readonly postFilter: (
    state: CycleState,
    pod: PodInfo,
    snapshot: Snapshot,
    filtered: ReadonlyMap<string, Status>
  ) => PostFilterResult
}

/** Computes what Score needs once per cycle, over the feasible nodes. */
export interface PreScorePlugin extends Plugin {
  readonly preScore: (state: CycleState, pod: PodInfo, nodes: ReadonlyArray<NodeInfo>) => Status
}

/** One node's score from one plugin. */
export interface NodeScore {
  readonly node: string
  score: number
}

/** Scores one node; NormalizeScore (optional) rescales all of this plugin's scores to 0–100. */
export interface ScorePlugin extends Plugin {
  readonly score: (state: CycleState, pod: PodInfo, node: NodeInfo) => number
  /** Rescale in place to [MinScore, MaxScore]. */
  readonly normalize?: (state: CycleState, pod: PodInfo, scores: Array<NodeScore>) => void
}

/** Claims what the pod will use on the chosen node before binding (volumes); undone on failure. */
export interface ReservePlugin extends Plugin {
  readonly reserve: (state: CycleState, pod: PodInfo, node: string) => Status
  readonly unreserve: (state: CycleState, pod: PodInfo, node: string) => void
}

/** Approves, refuses or delays binding (gang scheduling and the like). */
export interface PermitPlugin extends Plugin {
  readonly permit: (state: CycleState, pod: PodInfo, node: string) => { readonly status: Status; readonly waitMs?: number }
}

/** Writes the decision: the only effectful point (the `pods/binding` subresource by default). */
export interface BindPlugin extends Plugin {
  readonly bind: (state: CycleState, pod: PodInfo, node: string) => Effect.Effect<Status>
}

/** A pod waiting in the scheduling queue. */
export interface QueuedPodInfo {
  readonly pod: PodInfo
  /** When it was first queued (ms). */
  readonly initialAttemptMs: number
  /** When it was queued this time (ms). */
  readonly timestampMs: number
  /** Scheduling attempts so far. */
  readonly attempts: number
  /** The plugins that rejected it last time (what events can make it schedulable). */
  readonly unschedulablePlugins: ReadonlySet<string>
}

/** The extension points, as named in a profile. */
export const ExtensionPoints = ["queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit", "bind"] as const

/** An extension point's name. */
export type ExtensionPoint = (typeof ExtensionPoints)[number]

/** What a plugin factory may use besides its arguments. */
export interface Handle {
  /** The profile's scheduler name. */
  readonly schedulerName: string
  /** Binds through the API (for the default Bind plugin). */
  readonly bindPod?: (pod: JsonObject, node: string) => Effect.Effect<Status>
}

/** Builds a plugin from its profile arguments; answers an error message for bad arguments. */
export type Factory = (args: unknown, handle: Handle) => Plugin | string

/** Plugin factories by name. */
export type Registry = Readonly<Record<string, Factory>>

/** A plugin enabled at an extension point, with its score weight. */
export interface Enabled {
  readonly name: string
  readonly weight?: number
}

/** A scheduling profile (KubeSchedulerConfiguration's `profiles[]`). */
export interface Profile {
  readonly schedulerName: string
  /** Per extension point: plugins to enable (added to the defaults) and disable (`*`: all defaults). */
  readonly plugins?: Partial<Record<ExtensionPoint | "multiPoint", { readonly enabled?: ReadonlyArray<Enabled>; readonly disabled?: ReadonlyArray<{ readonly name: string }> }>>
  /** Arguments per plugin. */
  readonly pluginConfig?: ReadonlyArray<{ readonly name: string; readonly args?: unknown }>
  /** Share of feasible nodes to find before scoring (0: adaptive, as kube-scheduler). */
  readonly percentageOfNodesToScore?: number
}

/** A profile's plugins, built and ordered per extension point. */
export interface Framework {
  readonly profile: Profile
  readonly queueSort: QueueSortPlugin | undefined
  readonly preFilter: ReadonlyArray<PreFilterPlugin>
  readonly filter: ReadonlyArray<FilterPlugin>
  readonly postFilter: ReadonlyArray<PostFilterPlugin>
  readonly preScore: ReadonlyArray<PreScorePlugin>
  readonly score: ReadonlyArray<{ readonly plugin: ScorePlugin; readonly weight: number }>
  readonly reserve: ReadonlyArray<ReservePlugin>
  readonly permit: ReadonlyArray<PermitPlugin>
  readonly bind: ReadonlyArray<BindPlugin>
}
