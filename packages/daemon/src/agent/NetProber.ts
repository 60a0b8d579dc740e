/**
 * core's Prober port over node:http, node:https and node:net, as the kubelet probes: an HTTP GET
 * succeeds with a status from 200 to 399 (certificates are not verified, the kubelet's
 * `InsecureSkipVerify`), sent with `User-Agent: kube-probe/1.31` and the probe's headers (a `Host`
 * header among them names the virtual host); a TCP probe succeeds when the connection opens.
 * Every probe is bounded by its timeout and by the fiber that runs it.
 */
import { Prober } from "@koder/fleet-core"
import { Effect, Layer } from "effect"
import { request as httpRequest } from "node:http"
import { request as httpsRequest } from "node:https"
import { connect } from "node:net"

const success: Prober.Outcome = { result: "success", message: "" }
const failure = (message: string): Prober.Outcome => ({ result: "failure", message })

const httpGet = (target: Extract<Prober.Target, { _tag: "HttpGet" }>, timeoutMs: number) =>
  Effect.async<Prober.Outcome>((resume) => {
    const headers: Record<string, string> = { "user-agent": "kube-probe/1.31", accept: "*/*" }
    for (const h of target.headers) headers[h.name.toLowerCase()] = h.value
    const path = target.path.startsWith("/") ? target.path : `/${target.path}`
    const url = `${target.scheme.toLowerCase()}://${target.host}:${target.port}${path}`
    const request = (target.scheme === "HTTPS" ? httpsRequest : httpRequest)(
      { host: target.host, port: target.port, path, method: "GET", headers, agent: false, rejectUnauthorized: false },
      (response) => {
        response.resume()
        const code = response.statusCode ?? 0
        resume(Effect.succeed(code >= 200 && code < 400 ? success : failure(`HTTP probe failed with statuscode: ${code}`)))
      }
    )
    const timer = setTimeout(() => {
      request.destroy()
      resume(Effect.succeed(failure(`Get "${url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)))
    }, timeoutMs)
    request.on("error", (e) => resume(Effect.succeed(failure(`Get "${url}": ${e.message}`))))
    request.on("close", () => clearTimeout(timer))
    request.end()
    return Effect.sync(() => {
      clearTimeout(timer)
      request.destroy()
    })
  })

const tcp = (target: Extract<Prober.Target, { _tag: "TcpSocket" }>, timeoutMs: number) =>
  Effect.async<Prober.Outcome>((resume) => {
    const socket = connect({ host: target.host, port: target.port })
    const timer = setTimeout(() => {
      socket.destroy()
      resume(Effect.succeed(failure(`dial tcp ${target.host}:${target.port}: i/o timeout`)))
    }, timeoutMs)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed(success))
    })
    socket.once("error", (e) => {
      clearTimeout(timer)
      resume(Effect.succeed(failure(`dial tcp ${target.host}:${target.port}: ${e.message}`)))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      socket.destroy()
    })
  })

/** The prober. */
export const make = (): Prober.ProberService => ({
  probe: (target, timeoutMs) => (target._tag === "HttpGet" ? httpGet(target, timeoutMs) : tcp(target, timeoutMs))
})

/** The Prober port over the network. */
export const layer: Layer.Layer<Prober.Prober> = Layer.sync(Prober.Prober, make)
