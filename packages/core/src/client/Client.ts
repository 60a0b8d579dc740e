/**
 * The typed Fleet API client for TypeScript consumers (the CLI, the hub, embedding services).
 * It speaks the Kubernetes REST conventions over an injected `fetch` (so core stays free of HTTP
 * libraries; the caller supplies one that trusts the cluster CA), maps every error Status to an
 * `ApiError`, and offers `watch` as a Stream that reconnects from the last resourceVersion and,
 * after a 410, re-lists and emits the difference, so a consumer never misses a state.
 */
import type { Effect } from "effect"
import type { ApiRequest, ApiResponse } from "../api/Http.js"
import type { JsonObject } from "../object/Json.js"
import { metadataOf, namespaceOrUndefined } from "../object/Metadata.js"
import type { ResourceRef } from "../object/ResourceRefs.js"
import * as List from "./internal/list.js"
import * as Rest from "./internal/rest.js"
import * as Watch from "./internal/watch.js"

/** A JSON object from the API. */
export type { JsonObject } from "../object/Json.js"

/** How to reach a server. */
export interface Config {
  /** Base URL, e.g. `https://127.0.0.1:9300`. */
  readonly server: string
  /** Bearer token. */
  readonly token?: string
  /** The fetch to use (one that trusts the cluster CA). Defaults to the global fetch. */
  readonly fetch?: typeof globalThis.fetch
  /** Instead of fetch: hand requests to an API handler in the same process (`InProcess.transport`). */
  readonly transport?: Transport
  /**
   * Called with the text of each `Warning: 299` the server answers (admission, deprecations,
   * unknown fields), on successes and failures alike; kubectl prints them as `Warning: <text>`.
   */
  readonly onWarning?: (text: string) => void
}

/**
 * Sends a request as the API handler takes it and answers as the handler does, without HTTP: the
 * in-process client of controllers and the scheduler, which would otherwise spend more on building
 * and reading WHATWG Requests, Responses and streams than the server spends on the request.
 */
export type Transport = (request: Omit<ApiRequest, "user" | "client">) => Effect.Effect<ApiResponse>

/** Names a resource: apiVersion plus kind (built-in) or plural (any, incl. CRDs). */
export type { ResourceRef } from "../object/ResourceRefs.js"

/** A watch event as the client delivers it. */
export interface WatchEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED"
  readonly object: JsonObject
}

/** List and watch options. */
export interface ListOptions {
  readonly namespace?: string
  readonly labelSelector?: string
  readonly fieldSelector?: string
  readonly limit?: number
  readonly continue?: string
  readonly resourceVersion?: string
  /** For watches: ask the server to end each connection after this long (the client reconnects). */
  readonly timeoutSeconds?: number
}

/** Watch options. */
export interface WatchOptions extends ListOptions {
  /**
   * Called after each (re)list has been emitted, with the list's resourceVersion: from then on the
   * consumer's view is complete (informers use it for "has synced").
   */
  readonly onSynced?: (resourceVersion: string) => void
}

/** The patch flavours the API accepts. */
export type PatchType = "json" | "merge" | "strategic"

/** The content type of each patch flavour. */
const patchTypes: Record<PatchType, string> = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json"
}

/** The path of a collection or object. */
export const path = Rest.path

/** The resource an object names with its own apiVersion and kind. */
const refOf = (o: JsonObject): ResourceRef => ({ apiVersion: String(o["apiVersion"]), kind: String(o["kind"]) })

/**
 * A client: the typed verbs (CRUD, patch, subresources, list, watch) over one REST connection
 * (`internal/rest.ts`; lists and watches in `internal/list.ts`, `internal/watch.ts`).
 */
export const make = (config: Config) => {
  const rest = Rest.make(config)
  return {
    /** GET one object. */
    get: (ref: ResourceRef, namespace: string | undefined, name: string) =>
      Rest.request(rest, "GET", path(ref, namespace, name)),
    /** LIST one page. */
    list: (ref: ResourceRef, options: ListOptions = {}) => List.list(rest, ref, options),
    /** LIST every page. */
    listAll: (ref: ResourceRef, options: ListOptions = {}) => List.listAll(rest, ref, options),
    /** CREATE an object (its own apiVersion/kind/namespace say where). */
    create: (o: JsonObject) => Rest.request(rest, "POST", path(refOf(o), namespaceOrUndefined(o)), o),
    /** POST to a subresource of an object (`pods/binding`, `pods/eviction`, `serviceaccounts/token`). */
    createSubresource: (
      ref: ResourceRef,
      namespace: string | undefined,
      name: string,
      subresource: string,
      body: JsonObject
    ) => Rest.request(rest, "POST", path(ref, namespace, name, subresource), body),
    /** UPDATE (PUT) an object; its resourceVersion makes it a compare-and-swap. */
    update: (o: JsonObject, subresource?: "status" | "approval") => {
      const name = String(metadataOf(o)["name"])
      return Rest.request(rest, "PUT", path(refOf(o), namespaceOrUndefined(o), name, subresource), o)
    },
    /** PATCH an object. */
    patch: (
      ref: ResourceRef,
      namespace: string | undefined,
      name: string,
      type: PatchType,
      body: unknown,
      subresource?: string
    ) => Rest.request(rest, "PATCH", path(ref, namespace, name, subresource), body, patchTypes[type]),
    /**
     * Server-side apply of `o` (its own apiVersion/kind/namespace/name say where) as
     * `fieldManager`; `force` takes over fields other managers own.
     */
    apply: (o: JsonObject, fieldManager: string, force = false) =>
      Rest.request(
        rest,
        "PATCH",
        `${path(refOf(o), namespaceOrUndefined(o), String(metadataOf(o)["name"]))}?fieldManager=${encodeURIComponent(fieldManager)}${force ? "&force=true" : ""}`,
        o,
        "application/apply-patch+yaml"
      ),
    /** DELETE an object; answers the object (pending deletion) or a Status. */
    delete: (ref: ResourceRef, namespace: string | undefined, name: string, options: JsonObject = {}) =>
      Rest.request(rest, "DELETE", path(ref, namespace, name), { kind: "DeleteOptions", apiVersion: "v1", ...options }),
    /** A raw watch connection (no recovery). */
    watchOnce: (ref: ResourceRef, options: ListOptions) => Watch.watchOnce(rest, ref, options),
    /** A recovering watch. */
    watch: (ref: ResourceRef, options: WatchOptions = {}) => Watch.watch(rest, ref, options)
  }
}

/** A client. */
export type Client = ReturnType<typeof make>
