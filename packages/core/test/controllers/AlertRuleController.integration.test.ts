/**
 * AlertRules through the real API against a real local webhook server (node:http): an Event storm
 * notifies once, the alert stays deduplicated until the resend interval, headers come from a
 * Secret, a failing webhook shows in status (retried, paced), and a resolved alert is announced.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import type * as Client from "../../src/client/Client.js"
import * as AlertRule from "../../src/controllers/AlertRuleController.js"
import * as EventRecorder from "../../src/client/EventRecorder.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

interface Received {
  readonly path: string
  readonly at: number
  readonly headers: IncomingHttpHeaders
  readonly body: any
}

/** A webhook receiver: `/ok` answers 200, `/broken` 500; everything is recorded. */
const webhookServer = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly received: Array<Received> }>((resume) => {
    const received: Array<Received> = []
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        received.push({ path: req.url ?? "", at: Date.now(), headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
        res.statusCode = (req.url ?? "").startsWith("/broken") ? 500 : 200
        res.end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed(Object.assign({ url: `http://127.0.0.1:${port}`, received }, { server })))
    })
  }),
  (w) => Effect.async<void>((resume) => (w as unknown as { server: { close: (cb: () => void) => void; closeAllConnections: () => void } }).server.close(() => resume(Effect.void)))
)

const ns = "shop"
const secretValue = "Bearer s3cr3t-token"
const RuleRef: Client.ResourceRef = { apiVersion: "fleet.koder.dev/v1", kind: "AlertRule" }

const rule = (name: string, spec: Record<string, unknown>) => ({ apiVersion: "fleet.koder.dev/v1", kind: "AlertRule", metadata: { name, namespace: ns }, spec })
const pod = (name: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: ns, uid: `uid-${name}` } })
const status = (c: TestCluster.TestCluster, name: string) => Effect.map(c.client.get(RuleRef, ns, name), (r) => (r["status"] ?? {}) as Record<string, any>)
const fail = (why: string) => Effect.fail(new Error(why))
/** Succeeds once `condition` holds (checked anew on every poll). */
const until = (condition: () => boolean, why: string) => Effect.suspend(() => (condition() ? Effect.void : fail(why)))

describe("AlertRule (integration, real webhook)", () => {
  it.live(
    "an Event storm notifies once, resends after the interval, with headers from a Secret",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const hook = yield* webhookServer
          const c = yield* TestCluster.make({ nodes: 0, scheduler: false, controllers: [AlertRule.reconciler({ retryMs: 300, source: "fleet-test" })] })
          yield* c.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })
          yield* c.client.create({ apiVersion: "v1", kind: "Secret", metadata: { name: "notify", namespace: ns }, stringData: { token: secretValue } })
          yield* c.client.create(
            rule("crashloops", {
              match: { reasons: ["BackOff"], involvedKinds: ["Pod"] },
              threshold: { count: 5, window: "1m" },
              severity: "critical",
              labels: { team: "shop" },
              resendInterval: "3s",
              webhook: {
                url: `${hook.url}/ok`,
                headers: [
                  { name: "Authorization", valueFrom: { secretKeyRef: { name: "notify", key: "token" } } },
                  { name: "X-Team", value: "shop" }
                ]
              }
            })
          )
          // A rule watching another reason stays quiet through the storm.
          yield* c.client.create(rule("pulls", { match: { reasons: ["Pulled"] }, webhook: { url: `${hook.url}/ok` } }))

          const recorder = EventRecorder.make(c.client, { component: "kubelet", host: "node-0" })
          const crash = (i: number) => recorder.record(pod(`web-${i % 3}`), "Warning", "BackOff", "Back-off restarting failed container")
          // Below the threshold: nothing yet.
          for (let i = 0; i < 3; i++) yield* crash(i)
          yield* c.idle
          expect(hook.received).toHaveLength(0)
          // The storm: dozens of occurrences, one notification.
          for (let i = 0; i < 30; i++) yield* crash(i)
          yield* c.eventually(until(() => hook.received.length >= 1, "no notification yet"))
          const first = hook.received[0]!
          expect(first.headers["authorization"]).toBe(secretValue)
          expect(first.headers["x-team"]).toBe("shop")
          expect(first.headers["content-type"]).toBe("application/json")
          expect(first.body).toMatchObject({
            status: "firing",
            severity: "critical",
            source: "fleet-test",
            labels: { team: "shop", alertrule: "crashloops", namespace: ns, severity: "critical" },
            rule: { namespace: ns, name: "crashloops" },
            threshold: { count: 5, window: "1m" }
          })
          expect(first.body.title).toBe("[FIRING] shop/crashloops: BackOff on Pod")
          expect(first.body.occurrences).toBeGreaterThanOrEqual(5)
          expect(first.body.events.map((e: any) => e.involvedObject.name).sort()).toEqual(["web-0", "web-1", "web-2"])

          // The storm goes on; the next notification is the resend, not one per event.
          const storming = yield* Effect.fork(Effect.forever(Effect.andThen(crash(1), Effect.sleep(100))))
          yield* c.eventually(until(() => hook.received.length >= 2, "no resend yet"), { timeoutMs: 10_000 })
          yield* Fiber.interrupt(storming)
          expect(hook.received).toHaveLength(2)
          const second = hook.received[1]!
          expect(second.at - first.at).toBeGreaterThanOrEqual(3_000)
          expect(second.body.fingerprint).toBe(first.body.fingerprint)
          expect(second.body.status).toBe("firing")

          const st = yield* status(c, "crashloops")
          expect(st).toMatchObject({ firing: true, lastFiredTime: first.body.firedAt })
          expect(st["lastDeliveryTime"]).toBeDefined()
          expect(st["lastDeliveryError"]).toBeUndefined()
          expect((yield* status(c, "pulls"))["firing"]).toBe(false)
          // The Secret's value appears nowhere in the rule.
          expect(JSON.stringify(yield* c.client.get(RuleRef, ns, "crashloops"))).not.toContain("s3cr3t")
        })
      ),
    30_000
  )

  it.live(
    "delivery errors show in status and are retried; a resolved alert is announced",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const hook = yield* webhookServer
          const c = yield* TestCluster.make({ nodes: 0, scheduler: false, controllers: [AlertRule.reconciler({ retryMs: 300 })] })
          yield* c.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })
          yield* c.client.create({ apiVersion: "v1", kind: "Secret", metadata: { name: "notify", namespace: ns }, stringData: { token: secretValue } })
          const header = (secret: string) => [{ name: "Authorization", valueFrom: { secretKeyRef: { name: secret, key: "token" } } }]
          yield* c.client.create(rule("broken", { match: { reasons: ["Failed"] }, webhook: { url: `${hook.url}/broken?key=hidden`, headers: header("notify") } }))
          yield* c.client.create(rule("no-secret", { match: { reasons: ["Failed"] }, webhook: { url: `${hook.url}/ok`, headers: header("missing") } }))
          yield* c.client.create({ apiVersion: "v1", kind: "Secret", metadata: { name: "multiline", namespace: ns }, stringData: { token: "line one\ns3cr3t line two" } })
          yield* c.client.create(rule("bad-value", { match: { reasons: ["Failed"] }, webhook: { url: `${hook.url}/ok`, headers: header("multiline") } }))
          yield* c.client.create(rule("short", { match: { reasons: ["Evicted"] }, threshold: { count: 1, window: "2s" }, webhook: { url: `${hook.url}/short` } }))

          const recorder = EventRecorder.make(c.client, { component: "kubelet" })
          yield* recorder.record(pod("job-1"), "Warning", "Failed", "Error: ImagePullBackOff")
          yield* recorder.record(pod("batch-1"), "Warning", "Evicted", "The node was low on resource: memory")

          const broken = yield* c.eventually(
            Effect.flatMap(status(c, "broken"), (s) => (typeof s["lastDeliveryError"] === "string" ? Effect.succeed(s) : fail(`no error yet: ${JSON.stringify(s)}`)))
          )
          expect(broken["lastDeliveryError"]).toBe(`POST ${hook.url}/broken: HTTP 500 Internal Server Error`)
          expect(broken["firing"]).toBe(true)
          expect(broken["lastDeliveryTime"]).toBeUndefined()
          // Retried, paced by retryMs, with the Secret's header each time.
          yield* c.eventually(until(() => hook.received.filter((r) => r.path.startsWith("/broken")).length >= 3, "not retried"), { timeoutMs: 10_000 })
          const attempts = hook.received.filter((r) => r.path.startsWith("/broken"))
          for (let i = 1; i < attempts.length; i++) expect(attempts[i]!.at - attempts[i - 1]!.at).toBeGreaterThanOrEqual(300)
          expect(attempts.every((a) => a.headers["authorization"] === secretValue)).toBe(true)

          const noSecret = yield* c.eventually(
            Effect.flatMap(status(c, "no-secret"), (s) => (typeof s["lastDeliveryError"] === "string" ? Effect.succeed(s) : fail(`no error yet: ${JSON.stringify(s)}`)))
          )
          expect(noSecret["lastDeliveryError"]).toBe("header Authorization: secret shop/missing not found")
          // A Secret value no header can carry: the error says so without quoting it.
          const badValue = yield* c.eventually(
            Effect.flatMap(status(c, "bad-value"), (s) => (typeof s["lastDeliveryError"] === "string" ? Effect.succeed(s) : fail(`no error yet: ${JSON.stringify(s)}`)))
          )
          expect(badValue["lastDeliveryError"]).toContain("header Authorization: the value has characters HTTP headers cannot carry")
          expect(hook.received.filter((r) => r.path === "/ok")).toHaveLength(0)
          for (const name of ["broken", "no-secret", "bad-value"]) expect(JSON.stringify(yield* c.client.get(RuleRef, ns, name))).not.toContain("s3cr3t")

          // `short` fired on the eviction and resolves once the event leaves its 2 s window.
          yield* c.eventually(until(() => hook.received.some((r) => r.path === "/short" && r.body.status === "resolved"), "not resolved"), { timeoutMs: 10_000 })
          const short = hook.received.filter((r) => r.path === "/short")
          expect(short.map((r) => r.body.status)).toEqual(["firing", "resolved"])
          expect(short[0]!.body.title).toBe("[FIRING] shop/short: Evicted on Pod")
          // Nothing is left in the window: the title names what the rule matches.
          expect(short[1]!.body.title).toBe("[RESOLVED] shop/short: Evicted")
          expect(short[1]!.body.events).toEqual([])
          expect(short[1]!.body.fingerprint).toBe(short[0]!.body.fingerprint)
          // The notification goes out before the status is written.
          const st = yield* c.eventually(Effect.flatMap(status(c, "short"), (s) => (s["firing"] === false ? Effect.succeed(s) : fail(JSON.stringify(s)))))
          expect(st["occurrences"]).toBe(0)
          expect(st["lastResolvedTime"]).toBeDefined()
        })
      ),
    30_000
  )
})
