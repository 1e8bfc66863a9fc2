// Types for the harness-jobs package.

export const VERSION: string;

export type JobStatus = 'running' | 'stopping' | 'completed' | 'killed' | 'failed';

/** A job as the registry shows it (the WIT `job-snapshot`). */
export interface Job {
  id: string;
  kind: string;
  label: string;
  status: JobStatus;
  detail?: string;
  startedAt: number;
  finishedAt?: number;
  outputLimitBytes?: number;
  reported: boolean;
}

export type RegistryErrorTag = 'unknown-job' | 'foreign-job' | 'wait-aborted' | 'producer-failed';

/** An expected registry failure, rendered by the guest into the model's words. */
export class RegistryError extends Error {
  constructor(tag: RegistryErrorTag, val?: string);
  readonly tag: RegistryErrorTag;
  readonly val?: string;
}

/** The component trapped or answered outside the WIT. */
export class GuestError extends Error {}

export interface ToolResult {
  text: string;
  isError: boolean;
  value: unknown | null;
}

export interface ToolAnnotations {
  title: string;
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: object;
  outputSchema: object | null;
  /** MCP tool annotations: a title and the behaviour hints. */
  annotations: ToolAnnotations;
}

export interface Notice {
  text: string;
  summary?: string;
  plugin: string;
  form?: string;
}

export type Lane = 'inject' | 'followup';

export interface ExcerptWindow {
  wholeUpTo: number;
  headBytes: number;
  tailBytes: number;
}

/** What the guest may ask of a registry, for one caller at a time. */
export interface Backend {
  listJobs(caller: string | null): Job[];
  get(caller: string | null, jobId: string): Job;
  read(caller: string | null, jobId: string): { text: string; job: Job };
  kill(caller: string | null, jobId: string, reason?: string): 'requested' | 'already-finished';
  output(caller: string | null, jobId: string, window: ExcerptWindow): { head: string; tail: string; omittedBytes: number; job: Job };
  nowMs(): number;
}

/** The component's configuration record, as `configure` returned it. */
export type GuestConfig = Record<string, unknown>;

export class Guest {
  static load(backend: Backend | null, dir?: string): Promise<Guest>;
  backend: Backend | null;
  configure(configJson: string): GuestConfig;
  toolDefinitions(config: GuestConfig): ToolDefinition[];
  describeCall(config: GuestConfig, tool: string, argsJson: string): { title: string; kind: string; rawInput?: string } | null;
  systemPrompt(config: GuestConfig): { name: string; order: number; text: string } | null;
  invokeStep(caller: string | null, config: GuestConfig, tool: string, argsJson: string, waited?: Job | RegistryError):
    { done: ToolResult; wait?: undefined } | { wait: { jobId: string; timeoutMs: number }; done?: undefined };
  finalize(caller: string | null, config: GuestConfig, tool: string, argsJson: string, blocks: ({ text: string } | { other: string })[]): ({ text: string } | { other: string })[];
  completionNotice(config: GuestConfig, job: Job): Notice;
  deliver(config: GuestConfig, job: Job, owner: { status: 'idle' | 'running'; wakesSpent: number } | null): { lane: Lane; notice: Notice } | null;
  batchNotice(caller: string | null, config: GuestConfig, jobs: Job[]): Notice | null;
}

export interface RegistryOptions {
  graceMs?: number;
  maxPendingBytes?: number;
  keepBytes?: number;
}

export class Registry implements Backend {
  constructor(options?: RegistryOptions);
  startShell(command: string, options?: { owner?: string | null; cwd?: string; outputLimitBytes?: number; kind?: string }): string;
  onJobDone(listener: (job: Job, owner: string | null) => void): void;
  listJobs(caller: string | null): Job[];
  get(caller: string | null, jobId: string): Job;
  read(caller: string | null, jobId: string): { text: string; job: Job };
  kill(caller: string | null, jobId: string, reason?: string): 'requested' | 'already-finished';
  output(caller: string | null, jobId: string, window: ExcerptWindow): { head: string; tail: string; omittedBytes: number; job: Job };
  wait(caller: string | null, jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<Job>;
  nowMs(): number;
  inspect(jobId: string): Job | undefined;
  claimNotice(jobId: string): boolean;
  close(): Promise<void>;
}

export interface PluginOptions {
  config?: string | object;
  onNotice?: (owner: string | null, lane: Lane, notice: Notice) => void;
  ownerStatus?: (owner: string) => 'idle' | 'running';
  generated?: string;
}

export class Plugin {
  static load(registry: Registry, options?: PluginOptions): Promise<Plugin>;
  readonly config: GuestConfig;
  toolDefinitions(): ToolDefinition[];
  systemPrompt(): { name: string; order: number; text: string } | null;
  invoke(caller: string | null, tool: string, args: object | string, signal?: AbortSignal): Promise<ToolResult>;
  personWrote(owner: string): void;
  pullNotice(owner: string): Notice | null;
}
