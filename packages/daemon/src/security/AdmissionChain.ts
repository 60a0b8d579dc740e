/**
 * The server's admission chain: core's built-in plugins in kube-apiserver's order (see
 * `AdmissionPlugins.order`), with external webhooks called over node:https. The webhook
 * transport trusts exactly the webhook's `caBundle` when it has one (the system roots
 * otherwise), sends the AdmissionReview as JSON and bounds both the time and the answer's size.
 */
import { AdmissionPlugins, Meta, PodSecurityStandards } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { request } from "node:https"
import { ConfigError } from "../DaemonError.js"
import type { Context, Contribution } from "./Context.js"

/** The largest webhook answer read (kube-apiserver's limit is 3 MiB too). */
const maxResponseBytes = 3 * 1024 * 1024

/** POST an AdmissionReview over HTTPS (core's `Webhooks.Call`). */
export const httpsCall: AdmissionPlugins.Webhooks.Call = (url, caBundle, body, timeoutMillis) =>
  Effect.async<AdmissionPlugins.Webhooks.CallResponse, AdmissionPlugins.Webhooks.WebhookCallError>((resume) => {
    const fail = (reason: string) => resume(Effect.fail(new AdmissionPlugins.Webhooks.WebhookCallError({ reason })))
    let target: URL
    try {
      target = new URL(url)
    } catch {
      fail(`parse ${JSON.stringify(url)}: invalid URL`)
      return
    }
    if (target.protocol !== "https:") {
      fail(`Post ${JSON.stringify(url)}: webhook URLs must use https`)
      return
    }
    let settled = false
    const settle = (f: () => void) => {
      if (settled) return
      settled = true
      f()
    }
    const payload = Buffer.from(body)
    const req = request(
      target,
      {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", "content-length": String(payload.length) },
        ...(caBundle === undefined ? {} : { ca: caBundle }),
        timeout: timeoutMillis
      },
      (res) => {
        const chunks: Array<Buffer> = []
        let size = 0
        res.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > maxResponseBytes) {
            req.destroy(new Error(`the response is larger than ${maxResponseBytes} bytes`))
            return
          }
          chunks.push(chunk)
        })
        res.on("end", () => settle(() => resume(Effect.succeed({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))))
        res.on("error", (e) => settle(() => fail(`Post ${JSON.stringify(url)}: ${e.message}`)))
      }
    )
    req.on("timeout", () => req.destroy(new Error("context deadline exceeded")))
    req.on("error", (e) => settle(() => fail(`Post ${JSON.stringify(url)}: ${e.message}`)))
    req.end(payload)
    return Effect.sync(() => {
      settled = true
      req.destroy()
    })
  })

/**
 * The level of namespaces without Pod Security labels (`--pod-security-default`). Baseline, not
 * kube-apiserver's privileged: a pod asks for the host (its network, PID or IPC namespace, a
 * hostPath, privileged, extra capabilities) only where an administrator allowed it by label.
 */
export const defaultPodSecurityLevel: PodSecurityStandards.Level = "baseline"

/** A comma-separated list flag. */
const names = (v: unknown): ReadonlyArray<string> =>
  typeof v === "string" ? v.split(",").map((s) => s.trim()).filter((s) => s !== "") : []

/** The PodSecurity plugin's configuration from `--pod-security-*`. */
export const podSecurityOptions = (flags: Context["flags"]) => {
  const level = flags["pod-security-default"] ?? defaultPodSecurityLevel
  if (typeof level !== "string" || !PodSecurityStandards.isLevel(level)) {
    return Effect.fail(new ConfigError({ message: `--pod-security-default ${JSON.stringify(level)}: must be one of ${PodSecurityStandards.levels.join(", ")}` }))
  }
  return Effect.succeed({
    defaults: PodSecurityStandards.uniform(level),
    exemptions: {
      namespaces: names(flags["pod-security-exempt-namespaces"]),
      usernames: names(flags["pod-security-exempt-usernames"]),
      runtimeClasses: names(flags["pod-security-exempt-runtime-classes"])
    }
  })
}

/** Build this component: the built-in plugins, webhooks included, living as long as the server. */
export const make = (context: Context): Effect.Effect<Contribution, ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const region = context.flags["region"]
    const podSecurity = yield* podSecurityOptions(context.flags)
    const admission = yield* AdmissionPlugins.make({
      store: context.store,
      // Objects.prepareCreate labels every new object with the server's region before admission;
      // RegionLabel only restores a label a webhook dropped.
      region: typeof region === "string" && region !== "" ? region : Meta.DefaultRegion,
      call: httpsCall,
      podSecurity,
      // Pods get their ServiceAccount's token, the cluster CA and their namespace at the standard
      // path (the agent projects them), so in-cluster clients work as on Kubernetes.
      serviceAccount: { tokenVolume: true },
      ...(typeof context.flags["service-cluster-ip-range"] === "string" ? { serviceClusterIpRange: context.flags["service-cluster-ip-range"] } : {}),
      ...(typeof context.flags["service-node-port-range"] === "string" ? { serviceNodePortRange: context.flags["service-node-port-range"] } : {})
    })
    return { admission }
  })
