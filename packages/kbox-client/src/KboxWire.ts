/**
 * The kbox API's wire conventions shared by the client (this package) and any server of it
 * (`koder-fleet box`): the error body and its HTTP statuses, list envelopes, query encodings.
 * Bodies themselves are core's `Runtime` Schemas, encoded as JSON. README.md is the contract.
 */
import { Runtime } from "@koder/fleet-core"

/** The API version prefix of every path. */
export const prefix = "/v1" as const

/** Error codes on the wire: language-neutral names of the port's tagged errors. */
export type ErrorCode = "NotFound" | "AlreadyExists" | "Invalid" | "Unavailable" | "Unsupported"

/** `{"error": {...}}`: the body of every non-2xx answer. */
export interface ErrorBody {
  readonly error: {
    readonly code: ErrorCode
    readonly message: string
    /** For NotFound and AlreadyExists: what and which. */
    readonly kind?: Runtime.ObjectKind
    readonly id?: string
  }
}

/** The HTTP status of each error code. */
export const statusOf: Readonly<Record<ErrorCode, number>> = {
  NotFound: 404,
  AlreadyExists: 409,
  Invalid: 400,
  Unavailable: 503,
  Unsupported: 501
}

/** Encode one of the port's errors as the wire's error body and status. */
export const encodeError = (error: Runtime.RuntimeError): { readonly status: number; readonly body: ErrorBody } => {
  switch (error._tag) {
    case "RuntimeNotFound":
      return { status: 404, body: { error: { code: "NotFound", message: error.message, kind: error.kind, id: error.id } } }
    case "RuntimeAlreadyExists":
      return {
        status: 409,
        body: { error: { code: "AlreadyExists", message: error.message, kind: error.kind, id: error.id } }
      }
    case "RuntimeInvalid":
      return { status: 400, body: { error: { code: "Invalid", message: error.message } } }
    case "RuntimeUnavailable":
      return { status: 503, body: { error: { code: "Unavailable", message: error.message } } }
    case "RuntimeUnsupported":
      return { status: 501, body: { error: { code: "Unsupported", message: error.message } } }
  }
}

const kinds = new Set<string>(["sandbox", "container", "image"])

/**
 * Decode an error answer back into the port's error. Anything unrecognisable (a proxy's HTML
 * page, a 500 without a body) is `Unavailable`: the caller can only retry later.
 */
export const decodeError = (status: number, text: string): Runtime.RuntimeError => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  const e = (parsed as Partial<ErrorBody> | undefined)?.error
  const message = typeof e?.message === "string" ? e.message : `kbox answered ${status}: ${text.slice(0, 200)}`
  const kind = typeof e?.kind === "string" && kinds.has(e.kind) ? e.kind : "container"
  const id = typeof e?.id === "string" ? e.id : ""
  switch (e?.code) {
    case "NotFound":
      return new Runtime.NotFound({ kind, id, message })
    case "AlreadyExists":
      return new Runtime.AlreadyExists({ kind, id, message })
    case "Invalid":
      return new Runtime.Invalid({ message })
    case "Unsupported":
      return new Runtime.Unsupported({ message })
    default:
      return new Runtime.Unavailable({ message })
  }
}

/** `label=KEY=VALUE` query parameters (repeatable): keys never contain `=`, values may. */
export const encodeLabels = (params: URLSearchParams, labels: Readonly<Record<string, string>> | undefined): void => {
  for (const [k, v] of Object.entries(labels ?? {})) params.append("label", `${k}=${v}`)
}

/** Parse repeated `label=KEY=VALUE` parameters; `undefined` when there are none. */
export const decodeLabels = (params: URLSearchParams): Record<string, string> | undefined => {
  const all = params.getAll("label")
  if (all.length === 0) return undefined
  const labels: Record<string, string> = {}
  for (const pair of all) {
    const i = pair.indexOf("=")
    if (i > 0) labels[pair.slice(0, i)] = pair.slice(i + 1)
  }
  return labels
}

/** Query string of a container list. */
export const containerQuery = (filter: Runtime.ContainerFilter | undefined): string => {
  const params = new URLSearchParams()
  if (filter?.sandboxId !== undefined) params.set("sandboxId", filter.sandboxId)
  if (filter?.name !== undefined) params.set("name", filter.name)
  if (filter?.state !== undefined) params.set("state", filter.state)
  encodeLabels(params, filter?.labels)
  const q = params.toString()
  return q === "" ? "" : `?${q}`
}

/** Query string of a sandbox list. */
export const sandboxQuery = (filter: Runtime.SandboxFilter | undefined): string => {
  const params = new URLSearchParams()
  if (filter?.podUid !== undefined) params.set("podUid", filter.podUid)
  encodeLabels(params, filter?.labels)
  const q = params.toString()
  return q === "" ? "" : `?${q}`
}

/** Query string of a logs request. */
export const logsQuery = (options: Runtime.LogOptions | undefined): string => {
  const params = new URLSearchParams()
  if (options?.follow === true) params.set("follow", "true")
  if (options?.tailLines !== undefined) params.set("tailLines", String(options.tailLines))
  if (options?.sinceSeconds !== undefined) params.set("sinceSeconds", String(options.sinceSeconds))
  if (options?.timestamps === true) params.set("timestamps", "true")
  const q = params.toString()
  return q === "" ? "" : `?${q}`
}

/** Parse a logs request's query; `Invalid` messages for malformed numbers. */
export const decodeLogsQuery = (params: URLSearchParams): Runtime.LogOptions | string => {
  const num = (name: string): number | undefined | string => {
    const v = params.get(name)
    if (v === null || v === "") return undefined
    const n = Number(v)
    return Number.isInteger(n) && n >= 0 ? n : `${name}: expected a non-negative integer, got ${JSON.stringify(v)}`
  }
  const tailLines = num("tailLines")
  const sinceSeconds = num("sinceSeconds")
  if (typeof tailLines === "string") return tailLines
  if (typeof sinceSeconds === "string") return sinceSeconds
  const flag = (name: string) => params.get(name) === "true" || params.get(name) === "1"
  return {
    follow: flag("follow"),
    timestamps: flag("timestamps"),
    ...(tailLines === undefined ? {} : { tailLines }),
    ...(sinceSeconds === undefined ? {} : { sinceSeconds })
  }
}
