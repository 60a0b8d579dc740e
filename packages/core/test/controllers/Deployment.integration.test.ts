/**
 * The Deployment and ReplicaSet controllers through the real API, with the test cluster's
 * scheduler and simulated kubelets.
 *
 * Budgets are checked on pod objects at every pod event the shared informer delivers: a pod
 * counts when it exists, belongs to the Deployment (its labels) and is not terminating
 * (no deletionTimestamp) and not finished; upstream states `replicas + maxSurge` on the sum of
 * its ReplicaSets' `spec.replicas`, which the pods follow a moment later, so a pod-level check
 * is the stricter one (terminating pods are on their way out and are not counted).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as Deployment from "../../src/controllers/Deployment.js"
import * as Pods from "../../src/object/Pods.js"
import * as ReplicaSet from "../../src/controllers/ReplicaSet.js"
import * as TestCluster from "../../src/testing/TestCluster.js"
import * as Metadata from "../../src/object/Metadata.js"

type Json = Record<string, any>

const ns = "default"
const DeployRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }
const RSRef: Client.ResourceRef = { apiVersion: "apps/v1", kind: "ReplicaSet" }
const PodRef: Client.ResourceRef = { apiVersion: "v1", kind: "Pod" }

const deployment = (name: string, replicas: number, image: string, spec: Json = {}, templateAnnotations: Record<string, string> = {}): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name }, ...(Object.keys(templateAnnotations).length > 0 ? { annotations: templateAnnotations } : {}) },
      spec: { containers: [{ name: "app", image }] }
    },
    ...spec
  }
})

const cluster = (podStartupMs = 30) =>
  TestCluster.make({ nodes: 3, podStartupMs, controllers: [Deployment.reconciler(), ReplicaSet.reconciler()] })

const imageOf = (pod: Json) => String(pod["spec"]?.["containers"]?.[0]?.["image"])
const labelOf = (o: Json, k: string) => (o["metadata"]?.["labels"] ?? {})[k]
const live = (pod: Json) => !Metadata.isTerminating(pod) && Pods.isActive(pod)

const get = (c: TestCluster.TestCluster, ref: Client.ResourceRef, name: string) => c.client.get(ref, ns, name) as Effect.Effect<Json, unknown>

const replicaSetsOf = (c: TestCluster.TestCluster, app: string) =>
  Effect.map(c.client.list(RSRef, { namespace: ns, labelSelector: `app=${app}` }), (l) => (l["items"] as Array<Json>) ?? [])

const check = (ok: boolean, why: () => string) => (ok ? Effect.void : Effect.fail(new Error(why())))

/** Wait until the Deployment reports a finished rollout of `image` with `replicas` ready pods. */
const rolledOut = (c: TestCluster.TestCluster, name: string, replicas: number, image: string) =>
  c.eventually(
    Effect.gen(function* () {
      const d = yield* get(c, DeployRef, name)
      const s = d["status"] ?? {}
      yield* check(
        s.observedGeneration >= d.metadata.generation && s.updatedReplicas === replicas && s.replicas === replicas && s.availableReplicas === replicas,
        () => `status ${JSON.stringify(s)}`
      )
      const pods = (yield* TestCluster.pods(c, ns, `app=${name}`)).filter(live)
      yield* check(pods.length === replicas && pods.every((p) => imageOf(p) === image && Pods.isReady(p)), () => `pods ${pods.map((p) => `${imageOf(p)}:${Pods.isReady(p)}`).join(",")}`)
      return d
    }),
    { timeoutMs: 30_000 }
  )

/**
 * Follow the Deployment's pods at every informer event from now on, calling `onEvent` with the
 * current set (the replay of existing pods on subscribing builds the set without checks).
 */
const follow = (c: TestCluster.TestCluster, app: string, onEvent: (pods: ReadonlyArray<Json>) => void) => {
  const pods = new Map<string, Json>()
  let replayed = false
  const stop = c.informers.for(PodRef).subscribe((change) => {
    if (labelOf(change.object, "app") !== app) return
    const key = String(Metadata.metadataOf(change.object)["name"])
    if (change.type === "DELETED") pods.delete(key)
    else pods.set(key, change.object)
    if (replayed) onEvent([...pods.values()])
  })
  replayed = true
  return stop
}

describe("Deployment through the API", () => {
  it.live("a 10-replica rolling update keeps within maxSurge and maxUnavailable at every pod event", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        const maxSurge = 3
        const maxUnavailable = 2
        yield* c.client.create(deployment("web", 10, "app:v1", { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge, maxUnavailable } } }))
        const before = yield* rolledOut(c, "web", 10, "app:v1")
        expect(before.metadata.annotations[Deployment.RevisionAnnotation]).toBe("1")

        const violations: Array<string> = []
        let events = 0
        let minReady = Infinity
        let maxTotal = 0
        const stop = follow(c, "web", (pods) => {
          events++
          const running = pods.filter(live)
          const ready = running.filter(Pods.isReady).length
          minReady = Math.min(minReady, ready)
          maxTotal = Math.max(maxTotal, running.length)
          if (ready < 10 - maxUnavailable) violations.push(`only ${ready} ready at event ${events}`)
          if (running.length > 10 + maxSurge) violations.push(`${running.length} pods at event ${events}`)
        })
        yield* c.client.patch(DeployRef, ns, "web", "strategic", { spec: { template: { spec: { containers: [{ name: "app", image: "app:v2" }] } } } })
        const after = yield* rolledOut(c, "web", 10, "app:v2")
        expect(violations).toEqual([])
        // Old pods finish terminating a moment after the status says the rollout is done.
        yield* c.eventually(Effect.flatMap(TestCluster.pods(c, ns, "app=web"), (pods) => check(pods.length === 10, () => `${pods.length} pods`)))
        stop()

        expect(violations).toEqual([])
        expect(events).toBeGreaterThan(20)
        expect(minReady).toBeGreaterThanOrEqual(8)
        expect(maxTotal).toBeLessThanOrEqual(13)
        // The rollout did use its budgets (it is not trivially serial).
        expect(maxTotal).toBeGreaterThan(10)

        const sets = yield* replicaSetsOf(c, "web")
        expect(sets).toHaveLength(2)
        const byRevision = Object.fromEntries(sets.map((rs) => [rs.metadata.annotations[Deployment.RevisionAnnotation], rs]))
        expect(byRevision["1"].spec.replicas).toBe(0)
        expect(byRevision["2"].spec.replicas).toBe(10)
        expect(byRevision["2"].metadata.name).toBe(`web-${byRevision["2"].metadata.labels[Deployment.PodTemplateHashLabel]}`)
        expect(byRevision["2"].spec.selector.matchLabels[Deployment.PodTemplateHashLabel]).toBe(byRevision["2"].metadata.labels[Deployment.PodTemplateHashLabel])
        expect(after.metadata.annotations[Deployment.RevisionAnnotation]).toBe("2")
        const conditions = Object.fromEntries((after.status.conditions as Array<Json>).map((x) => [x.type, x]))
        expect(conditions["Available"]).toMatchObject({ status: "True", reason: "MinimumReplicasAvailable" })
        yield* c.eventually(
          Effect.flatMap(get(c, DeployRef, "web"), (d) => {
            const p = (d.status.conditions as Array<Json>).find((x) => x.type === "Progressing")
            return check(p?.reason === "NewReplicaSetAvailable", () => JSON.stringify(p))
          })
        )

        const events_ = (yield* c.client.list({ apiVersion: "v1", kind: "Event" }, { namespace: ns }))["items"] as Array<Json>
        const scaling = events_.filter((e) => e.reason === "ScalingReplicaSet" && e.involvedObject.name === "web").map((e) => e.message as string)
        expect(scaling).toContain(`Scaled up replica set ${byRevision["2"].metadata.name} from 0 to 3`)
        expect(scaling.some((m) => m.startsWith(`Scaled down replica set ${byRevision["1"].metadata.name} from 10 to`))).toBe(true)
      })
    ),
    60_000
  )

  it.live("rollback by copying the old template reuses the old ReplicaSet with a new revision", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("api", 4, "api:v1"))
        yield* rolledOut(c, "api", 4, "api:v1")
        yield* c.client.patch(DeployRef, ns, "api", "strategic", { spec: { template: { spec: { containers: [{ name: "app", image: "api:v2" }] } } } })
        yield* rolledOut(c, "api", 4, "api:v2")
        const v1 = (yield* replicaSetsOf(c, "api")).find((rs) => rs.metadata.annotations[Deployment.RevisionAnnotation] === "1")!
        expect(v1.spec.replicas).toBe(0)

        // What `kubectl rollout undo --to-revision=1` sends: the old template minus the hash label.
        const template = structuredClone(v1.spec.template)
        delete template.metadata.labels[Deployment.PodTemplateHashLabel]
        yield* c.client.patch(DeployRef, ns, "api", "json", [{ op: "replace", path: "/spec/template", value: template }])
        const d = yield* rolledOut(c, "api", 4, "api:v1")

        const sets = yield* replicaSetsOf(c, "api")
        expect(sets).toHaveLength(2)
        const reused = sets.find((rs) => rs.metadata.name === v1.metadata.name)!
        expect(reused.spec.replicas).toBe(4)
        expect(reused.metadata.annotations[Deployment.RevisionAnnotation]).toBe("3")
        expect(reused.metadata.annotations[Deployment.RevisionHistoryAnnotation]).toBe("1")
        expect(reused.metadata.uid).toBe(v1.metadata.uid)
        yield* c.eventually(
          Effect.flatMap(get(c, DeployRef, "api"), (x) => check(x.metadata.annotations[Deployment.RevisionAnnotation] === "3", () => JSON.stringify(x.metadata.annotations)))
        )
        expect(d.status.updatedReplicas).toBe(4)
      })
    ),
    60_000
  )

  it.live("rollout restart (a restartedAt template annotation) rolls a new ReplicaSet", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("cron", 2, "cron:v1"))
        yield* rolledOut(c, "cron", 2, "cron:v1")
        const [first] = yield* replicaSetsOf(c, "cron")
        yield* c.client.patch(DeployRef, ns, "cron", "strategic", {
          spec: { template: { metadata: { annotations: { [Deployment.RestartedAtAnnotation]: "2024-01-01T00:00:00Z" } } } }
        })
        yield* c.eventually(
          Effect.gen(function* () {
            const sets = yield* replicaSetsOf(c, "cron")
            const fresh = sets.find((rs) => rs.metadata.name !== first!.metadata.name)
            yield* check(fresh !== undefined && fresh.status?.availableReplicas === 2, () => "no restarted ReplicaSet yet")
            const pods = (yield* TestCluster.pods(c, ns, "app=cron")).filter(live) as ReadonlyArray<Json>
            yield* check(pods.length === 2 && pods.every((p) => p.metadata.annotations?.[Deployment.RestartedAtAnnotation] !== undefined), () => "old pods remain")
          }),
          { timeoutMs: 30_000 }
        )
      })
    ),
    60_000
  )

  it.live("pause stops a rollout midway and resume finishes it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // Slow pods and one at a time, so the rollout is surely midway when paused.
        const c = yield* cluster(150)
        yield* c.client.create(deployment("pz", 10, "pz:v1", { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }))
        yield* rolledOut(c, "pz", 10, "pz:v1")
        yield* c.client.patch(DeployRef, ns, "pz", "strategic", { spec: { template: { spec: { containers: [{ name: "app", image: "pz:v2" }] } } } })
        yield* c.eventually(Effect.flatMap(get(c, DeployRef, "pz"), (d) => check((d.status?.updatedReplicas ?? 0) >= 1, () => "no new pod yet")))
        yield* c.client.patch(DeployRef, ns, "pz", "merge", { spec: { paused: true } })
        yield* c.eventually(
          Effect.flatMap(get(c, DeployRef, "pz"), (d) => {
            const p = (d.status?.conditions as Array<Json> | undefined)?.find((x) => x.type === "Progressing")
            return check(p?.reason === "DeploymentPaused" && p.status === "Unknown" && p.message === "Deployment is paused", () => JSON.stringify(p))
          })
        )
        yield* c.idle
        const sizes = (sets: ReadonlyArray<Json>) => Object.fromEntries(sets.map((rs) => [rs.metadata.name, rs.spec.replicas]))
        const paused = sizes(yield* replicaSetsOf(c, "pz"))
        // Every pod gets ready (which would let a running rollout take its next step), yet nothing moves.
        yield* c.eventually(
          Effect.flatMap(TestCluster.pods(c, ns, "app=pz"), (pods) =>
            check(pods.filter(live).every(Pods.isReady) && pods.every(live), () => "pods not settled")
          )
        )
        yield* c.idle
        const still = yield* replicaSetsOf(c, "pz")
        expect(sizes(still)).toEqual(paused)
        const newRS = still.find((rs) => rs.spec.template.spec.containers[0].image === "pz:v2")!
        const oldRS = still.find((rs) => rs.spec.template.spec.containers[0].image === "pz:v1")!
        expect(newRS.spec.replicas).toBeLessThan(10)
        expect(oldRS.spec.replicas).toBeGreaterThan(0)

        yield* c.client.patch(DeployRef, ns, "pz", "merge", { spec: { paused: false } })
        yield* rolledOut(c, "pz", 10, "pz:v2")
        yield* c.eventually(
          Effect.flatMap(get(c, DeployRef, "pz"), (d) => {
            const p = (d.status.conditions as Array<Json>).find((x) => x.type === "Progressing")
            return check(p?.reason === "NewReplicaSetAvailable", () => JSON.stringify(p))
          })
        )
      })
    ),
    60_000
  )

  it.live("a paused Deployment still scales", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("ps", 2, "ps:v1", { paused: true }))
        // Paused from the start: no ReplicaSet is created until it resumes.
        yield* c.idle
        expect(yield* replicaSetsOf(c, "ps")).toHaveLength(0)
        yield* c.client.patch(DeployRef, ns, "ps", "merge", { spec: { paused: false } })
        yield* rolledOut(c, "ps", 2, "ps:v1")
        yield* c.client.patch(DeployRef, ns, "ps", "merge", { spec: { paused: true } })
        yield* c.client.patch(DeployRef, ns, "ps", "merge", { spec: { replicas: 4 } })
        yield* rolledOut(c, "ps", 4, "ps:v1")
      })
    ),
    60_000
  )

  it.live("Recreate never runs old and new pods at once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("rc", 3, "rc:v1", { strategy: { type: "Recreate" } }))
        yield* rolledOut(c, "rc", 3, "rc:v1")
        const overlaps: Array<string> = []
        let sawNone = false
        const stop = follow(c, "rc", (pods) => {
          // Terminating pods count here: Recreate waits until old pods are gone altogether.
          const images = new Set(pods.filter(Pods.isActive).map(imageOf))
          if (images.has("rc:v1") && images.has("rc:v2")) overlaps.push([...images].join(","))
          if (pods.length === 0) sawNone = true
        })
        yield* c.client.patch(DeployRef, ns, "rc", "strategic", { spec: { template: { spec: { containers: [{ name: "app", image: "rc:v2" }] } } } })
        yield* rolledOut(c, "rc", 3, "rc:v2")
        stop()
        expect(overlaps).toEqual([])
        expect(sawNone).toBe(true)
      })
    ),
    60_000
  )

  it.live("pods that never get ready exceed progressDeadlineSeconds", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("stuck", 2, "stuck:v1", { progressDeadlineSeconds: 1 }, { "sim.fleet.koder.dev/ready": "false" }))
        const d = yield* c.eventually(
          Effect.gen(function* () {
            const d = yield* get(c, DeployRef, "stuck")
            const p = (d.status?.conditions as Array<Json> | undefined)?.find((x) => x.type === "Progressing")
            yield* check(p?.status === "False" && p.reason === "ProgressDeadlineExceeded", () => JSON.stringify(d.status))
            return d
          }),
          { timeoutMs: 30_000 }
        )
        const [rs] = yield* replicaSetsOf(c, "stuck")
        const conditions = Object.fromEntries((d.status.conditions as Array<Json>).map((x) => [x.type, x]))
        expect(conditions["Progressing"].message).toBe(`ReplicaSet "${rs!.metadata.name}" has timed out progressing.`)
        expect(conditions["Available"]).toMatchObject({ status: "False", reason: "MinimumReplicasUnavailable" })
        expect(d.status.unavailableReplicas).toBe(2)
      })
    ),
    60_000
  )

  it.live("scaling mid-rollout spreads the change proportionally", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("pr", 10, "pr:v1", { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 3, maxUnavailable: 2 } } }))
        yield* rolledOut(c, "pr", 10, "pr:v1")
        // v2 never gets ready, so the rollout stalls with both ReplicaSets active.
        yield* c.client.patch(DeployRef, ns, "pr", "strategic", {
          spec: { template: { metadata: { annotations: { "sim.fleet.koder.dev/ready": "false" } }, spec: { containers: [{ name: "app", image: "pr:v2" }] } } }
        })
        yield* c.eventually(
          Effect.flatMap(replicaSetsOf(c, "pr"), (sets) => {
            const total = sets.reduce((n, rs) => n + rs.spec.replicas, 0)
            return check(sets.length === 2 && total === 13, () => JSON.stringify(sets.map((rs) => rs.spec.replicas)))
          })
        )
        yield* c.idle
        const before = yield* replicaSetsOf(c, "pr")
        yield* c.client.patch(DeployRef, ns, "pr", "merge", { spec: { replicas: 20 } })
        const after = yield* c.eventually(
          Effect.flatMap(replicaSetsOf(c, "pr"), (sets) => {
            const total = sets.reduce((n, rs) => n + rs.spec.replicas, 0)
            // replicas + maxSurge = 20 + 3.
            return check(total === 23, () => JSON.stringify(sets.map((rs) => rs.spec.replicas))).pipe(Effect.as(sets))
          })
        )
        for (const rs of after) {
          const old = before.find((b) => b.metadata.name === rs.metadata.name)!
          // Each grew in proportion (23/13 of its size, the leftover to the largest).
          expect(rs.spec.replicas).toBeGreaterThan(old.spec.replicas)
          expect(rs.metadata.annotations[Deployment.DesiredReplicasAnnotation]).toBe("20")
          expect(rs.metadata.annotations[Deployment.MaxReplicasAnnotation]).toBe("23")
        }
      })
    ),
    60_000
  )

  it.live("old ReplicaSets beyond revisionHistoryLimit are deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const c = yield* cluster()
        yield* c.client.create(deployment("hist", 1, "hist:v1", { revisionHistoryLimit: 1 }))
        for (const v of ["v1", "v2", "v3"]) {
          yield* c.client.patch(DeployRef, ns, "hist", "strategic", { spec: { template: { spec: { containers: [{ name: "app", image: `hist:${v}` }] } } } })
          yield* rolledOut(c, "hist", 1, `hist:${v}`)
        }
        yield* c.eventually(
          Effect.flatMap(replicaSetsOf(c, "hist"), (sets) =>
            check(sets.length === 2, () => sets.map((rs) => `${rs.metadata.annotations[Deployment.RevisionAnnotation]}`).join(","))
          )
        )
        const revisions = (yield* replicaSetsOf(c, "hist")).map((rs) => rs.metadata.annotations[Deployment.RevisionAnnotation]).sort()
        expect(revisions).toEqual(["2", "3"])
      })
    ),
    60_000
  )
})
