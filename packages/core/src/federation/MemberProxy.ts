/**
 * One API across members, on the hub:
 *
 *   …/memberclusters/{name}/proxy/{path}   one member's API, as the caller (Karmada's cluster proxy)
 *   …/aggregate/{group}/{version}/{…}      a list from every member at once, each item annotated
 *                                          with its member (`core` names the legacy group)
 *   …/memberclusters/{name}/tunnel         where a Pull member keeps its tunnel open (MemberTunnel)
 *
 * The hub authorizes the caller on its own RBAC first: `get`/`create`/`update`/`patch`/`delete`
 * on `memberclusters/proxy` for the member named, `list` on `aggregate` for aggregated reads. The
 * member then sees the request impersonating the caller (user and groups), so its own RBAC and
 * audit log apply too. Watches are not proxied (one request, one answer); a member that does not
 * answer is a 503 on the proxy and a Warning on an aggregated list, never a failed list.
 */
import { Effect, Schema, Stream } from "effect"
import * as ApiError from "../api/ApiError.js"
import type { SubresourceHandler } from "../api/ApiServer.js"
import { json, type ApiRequest, type ApiResponse, type MessageSocket, offeredProtocols, isWebSocket } from "../api/Http.js"
import type { Resource } from "../api/Registry.js"
import type { ResourceRoute } from "../api/Router.js"
import { virtual } from "../api/VirtualResource.js"
import * as Federation from "../model/Federation.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, type JsonObject } from "../object/Json.js"
import * as Impersonation from "../api/Impersonation.js"
import * as Table from "../api/Table.js"
import * as MemberConnections from "./MemberConnections.js"
import * as MemberTunnel from "./MemberTunnel.js"

/** The annotation naming the member an aggregated item came from. */
export const MemberAnnotation = `${Federation.Group}/member`

const plural = "memberclusters"
const decoder = new TextDecoder()

const watching = (request: ApiRequest, route: ResourceRoute) => route.watchPath || ["true", "1"].includes(request.query.get("watch") ?? "")

/** The headers the member sees: content negotiation and the caller's identity, nothing else of the hub's. */
const forwarded = (request: ApiRequest): Record<string, string> => {
  const out: Record<string, string> = { [Impersonation.UserHeader]: request.user.name }
  const groups = request.user.groups.filter((g) => g !== "system:authenticated")
  if (groups.length > 0) out[Impersonation.GroupHeader] = groups.join(Impersonation.valueSeparator)
  for (const h of ["accept", "content-type"]) {
    const v = request.headers[h]
    if (v !== undefined) out[h] = v
  }
  return out
}

const pathWithQuery = (path: string, query: URLSearchParams) => (query.size === 0 ? path : `${path}?${query.toString()}`)

const send = (connections: MemberConnections.Registry, member: string, request: MemberConnections.ProxyRequest): Effect.Effect<MemberConnections.ProxyResponse, ApiError.ApiError> => {
  const connection = connections.get(member)
  if (connection === undefined) return Effect.fail(MemberConnections.unreachable(member, "no connection to it is open (a Pull member's tunnel is down, or a Push member's kubeconfig is missing)"))
  return Effect.tryPromise({ try: () => connection.request(request), catch: (e) => MemberConnections.unreachable(member, e instanceof Error ? e.message : String(e)) })
}

/** `memberclusters/{name}/proxy/{path}`: the request, as the caller, on that member. */
export const proxyHandler = (connections: MemberConnections.Registry): SubresourceHandler => ({
  group: Federation.Group,
  plural,
  subresource: "proxy",
  handle: (request, route) =>
    Effect.gen(function* () {
      if (isWebSocket(request) || watching(request, route)) return yield* Effect.fail(ApiError.badRequest("the member proxy answers one request at a time: watches and streams are not proxied"))
      const member = route.name ?? ""
      const response = yield* send(connections, member, {
        method: request.method.toUpperCase(),
        path: pathWithQuery(`/${route.subpath ?? ""}`, request.query),
        headers: forwarded(request),
        ...(request.body === undefined ? {} : { body: request.body })
      })
      const headers: Record<string, string> = {}
      for (const h of ["content-type", "warning"]) if (response.headers[h] !== undefined) headers[h] = response.headers[h]!
      return { _tag: "Stream", status: response.status, headers, body: Stream.make(response.body) } satisfies ApiResponse
    })
})

/** `memberclusters/{name}/tunnel`: a Pull member (and only that member) opens its tunnel. */
export const tunnelHandler = (connections: MemberConnections.Registry, options: { readonly onChange?: (member: string, open: boolean) => void } = {}): SubresourceHandler => ({
  group: Federation.Group,
  plural,
  subresource: "tunnel",
  handle: (request, route) =>
    Effect.gen(function* () {
      const member = route.name ?? ""
      if (Federation.memberOf(request.user) !== member) {
        return yield* Effect.fail(ApiError.of(Status.forbidden({ group: Federation.Group, resource: `${plural}/tunnel` }, member, "only the member itself opens its tunnel")))
      }
      if (!isWebSocket(request) || !offeredProtocols(request).includes(MemberTunnel.Subprotocol)) {
        return yield* Effect.fail(ApiError.badRequest(`the tunnel is a WebSocket with the subprotocol ${MemberTunnel.Subprotocol}`))
      }
      return {
        _tag: "Upgrade",
        status: 101,
        headers: {},
        protocol: MemberTunnel.Subprotocol,
        serve: (socket: MessageSocket) =>
          Effect.promise(async () => {
            const tunnel = MemberTunnel.client(socket)
            const remove = connections.set(member, tunnel.connection)
            options.onChange?.(member, true)
            await tunnel.closed
            remove()
            options.onChange?.(member, false)
          }).pipe(Effect.onInterrupt(() => Effect.sync(() => socket.close(1001, "the hub is shutting down"))))
      } satisfies ApiResponse
    })
})

/** Where `aggregate/{group}/{version}/{rest}` goes on a member, or undefined for a malformed path. */
export const memberPath = (subpath: string): string | undefined => {
  const [group, version, ...rest] = subpath.split("/")
  if (group === undefined || group === "" || version === undefined || version === "" || rest.length === 0 || rest.some((p) => p === "")) return undefined
  return group === "core" ? `/api/${version}/${rest.join("/")}` : `/apis/${group}/${version}/${rest.join("/")}`
}

/** Merge the members' lists (pure): items in member order, each annotated; failures as warnings. */
export const merge = (answers: ReadonlyArray<{ readonly member: string; readonly list?: JsonObject; readonly error?: string }>): { readonly list: JsonObject; readonly warnings: ReadonlyArray<string> } => {
  const items: Array<JsonObject> = []
  const warnings: Array<string> = []
  let head: JsonObject | undefined
  for (const a of answers) {
    if (a.list === undefined) {
      warnings.push(`member ${a.member}: ${a.error ?? "no answer"}`)
      continue
    }
    head ??= a.list
    for (const item of asArray(a.list["items"]).map(asObject)) {
      const metadata = asObject(item["metadata"])
      items.push({ ...item, metadata: { ...metadata, annotations: { ...asObject(metadata["annotations"]), [MemberAnnotation]: a.member } } })
    }
  }
  return { list: { apiVersion: head?.["apiVersion"] ?? "v1", kind: head?.["kind"] ?? "List", metadata: {}, items }, warnings }
}

/** The column a merged Table starts with. */
export const MemberColumn = { name: "Member", type: "string", format: "", description: "The member cluster the row came from.", priority: 0 }

/**
 * Merge the members' Tables (pure), as `merge` merges lists: rows in member order, each with its
 * member as the first cell (and on its object, if the row carries one); the columns are the
 * first answer's, which every member renders alike (the same kernel); failures as warnings.
 */
export const mergeTables = (answers: ReadonlyArray<{ readonly member: string; readonly list?: JsonObject; readonly error?: string }>): { readonly list: JsonObject; readonly warnings: ReadonlyArray<string> } => {
  const rows: Array<JsonObject> = []
  const warnings: Array<string> = []
  let columns: ReadonlyArray<unknown> | undefined
  for (const a of answers) {
    if (a.list === undefined || a.list["kind"] !== "Table") {
      warnings.push(`member ${a.member}: ${a.error ?? (a.list === undefined ? "no answer" : "no Table in its answer")}`)
      continue
    }
    columns ??= asArray(a.list["columnDefinitions"])
    for (const row of asArray(a.list["rows"]).map(asObject)) {
      const object = asObject(row["object"])
      const metadata = asObject(object["metadata"])
      rows.push({
        ...row,
        cells: [a.member, ...asArray(row["cells"])],
        ...(row["object"] === undefined ? {} : { object: { ...object, metadata: { ...metadata, annotations: { ...asObject(metadata["annotations"]), [MemberAnnotation]: a.member } } } })
      })
    }
  }
  return { list: { apiVersion: "meta.k8s.io/v1", kind: "Table", metadata: {}, columnDefinitions: [MemberColumn, ...(columns ?? [{ name: "Name", type: "string", format: "name", description: "", priority: 0 }])], rows }, warnings }
}

const AggregateSchema = Schema.Struct({ apiVersion: Schema.String, kind: Schema.String })

/**
 * The `aggregate` virtual resource. `members` names every member the hub knows (joined or not),
 * so one that cannot be reached is named in a warning rather than silently left out.
 */
export const aggregateResource = (connections: MemberConnections.Registry, members: Effect.Effect<ReadonlyArray<string>, ApiError.ApiError>, options: { readonly timeoutMs?: number } = {}): Resource => ({
  ...virtual({
    group: Federation.Group,
    version: Federation.Version,
    kind: "Aggregate",
    plural: "aggregate",
    schema: AggregateSchema,
    handle: (request, route) =>
      Effect.gen(function* () {
        if (request.method.toUpperCase() !== "GET") return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: Federation.Group, resource: "aggregate" }, request.method.toLowerCase())))
        if (watching(request, route)) return yield* Effect.fail(ApiError.badRequest("aggregated reads are lists: watch each member through its proxy instead"))
        const path = memberPath(route.subpath ?? "")
        if (path === undefined) return yield* Effect.fail(ApiError.badRequest("expected …/aggregate/{group}/{version}/[namespaces/{namespace}/]{resource} (the legacy group is core)"))
        const names = [...new Set([...(yield* members), ...connections.members()])].sort()
        const query = new URLSearchParams(request.query)
        // kubectl and kfleet ask for Tables: each member renders its own, merged with a Member column.
        const tables = Table.wanted(request.headers["accept"])
        const headers = { ...forwarded(request), accept: tables ? `${Table.contentType}, application/json` : "application/json" }
        const answers = yield* Effect.forEach(
          names,
          (member) =>
            send(connections, member, { method: "GET", path: pathWithQuery(path, query), headers }).pipe(
              Effect.timeoutFail({ duration: options.timeoutMs ?? 10_000, onTimeout: () => MemberConnections.unreachable(member, "no answer in time") }),
              Effect.map((r) => {
                const body = (() => {
                  try {
                    return asObject(JSON.parse(decoder.decode(r.body)))
                  } catch {
                    return {}
                  }
                })()
                if (r.status !== 200) return { member, error: typeof body["message"] === "string" ? body["message"] : `HTTP ${r.status}` }
                if (!Array.isArray(body[tables ? "rows" : "items"])) return { member, error: tables ? "not a Table" : "not a list" }
                return { member, list: body }
              }),
              Effect.catchAll((e) => Effect.succeed({ member, error: (e.status.message ?? "unreachable").replace(`member ${member} `, "") }))
            ),
          { concurrency: 16 }
        )
        const merged = tables ? mergeTables(answers) : merge(answers)
        const warning = merged.warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(", ")
        return json(200, merged.list, { ...(tables ? { "content-type": Table.contentType } : {}), ...(warning === "" ? {} : { warning }) })
      })
  }),
  verbs: ["list"]
})
