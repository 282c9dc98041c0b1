/**
 * The wire types of the Holdpoint API, named and shaped exactly as the JSON is: request bodies are
 * sent as written and responses are returned as received, so a field a newer server adds reaches the caller too.
 */

/** Any value JSON can hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

export type QuestionKind = 'blocking' | 'non_blocking' | 'approval' | 'error_recovery';

export type ResponseType =
  | 'text'
  | 'boolean'
  | 'choice'
  | 'multi_choice'
  | 'approval'
  | 'error_recovery'
  | 'form'
  | 'number'
  | 'integer'
  | 'date'
  | 'datetime'
  | 'time'
  | 'rating'
  | 'email'
  | 'url'
  | 'markdown'
  | 'table'
  | 'file';

/** The response types a form field may have. */
export type FieldResponseType = Exclude<ResponseType, 'approval' | 'error_recovery' | 'form'>;

/** The response types a `table` column may have. */
export type ColumnResponseType = 'text' | 'number' | 'integer' | 'boolean' | 'date' | 'choice';

export type Urgency = 'low' | 'normal' | 'high' | 'critical';

export type QuestionStatus = 'pending' | 'answered' | 'defaulted' | 'expired' | 'cancelled';

/** Who or what resolved a question. */
export type Resolution = 'human' | 'default_on_timeout' | 'policy' | 'cancelled';

export type Role = 'viewer' | 'responder' | 'approver' | 'admin' | 'agent';

/** One choice of a `choice`, `multi_choice` or `error_recovery` question. */
/** The question timeouts a server takes, in seconds (its `HOLDPOINT_MIN_TIMEOUT_SECONDS` and `..._MAX_...`). */
export interface TimeoutBounds {
  min_seconds: number;
  max_seconds: number;
}

export interface QuestionOption {
  /** What an answer sends. */
  value: string;
  /** What a person reads. */
  label: string;
  description?: string;
}

/** One column of a `table`: each row of the answer has a value of `response_type` under `key`. */
export interface TableColumn {
  key: string;
  label: string;
  response_type: ColumnResponseType;
  /** The choices of a `choice` column; a plain string is its own value and label. */
  options?: Array<QuestionOption | string>;
  required?: boolean;
}

/**
 * The bounds of a field's type, which a single-value question carries at its top level too. Each belongs
 * to some types only; the server refuses one given to another type (422 naming it).
 */
export interface FieldRules {
  /** The least value of an `integer` or `number`. */
  min?: number;
  /** The greatest value of an `integer` or `number`; a `rating`'s stars (3..=10, default 5). */
  max?: number;
  /** The increment of an `integer` or `number`, from `min` (or 0). */
  step?: number;
  /** A slider, for an `integer` or `number` with both `min` and `max`. */
  widget?: 'slider';
  /** How many choices a `multi_choice` takes. */
  min_items?: number;
  max_items?: number;
  /** A `table`'s columns, 1..=20. */
  columns?: TableColumn[];
  /** How many rows a `table` takes (at most 200). */
  min_rows?: number;
  max_rows?: number;
  /** A `file`'s media types (`application/pdf`, or `image/*`); any when absent. */
  accept?: string[];
  /** The largest `file`, in bytes (at most the server's upload limit, 10 MiB by default). */
  max_bytes?: number;
}

/** One field of a `form` question; the answer maps each field's `key` to its value. */
export interface FormField extends FieldRules {
  key: string;
  label: string;
  response_type: FieldResponseType;
  /** For `choice` and `multi_choice` fields; a plain string is its own value and label. */
  options?: Array<QuestionOption | string>;
  required?: boolean;
  /** Help shown under the label. */
  description?: string;
  /** What an empty input shows. */
  placeholder?: string;
  /** What the input starts with; must fit the field. */
  default?: JsonValue;
}

/**
 * A file uploaded with `uploadFile`: what an answer's `file` field references (`{ file_id }`), and that field's
 * value once answered (the server's record of it, whatever the answer said).
 */
export interface UploadedFile {
  file_id: string;
  name: string;
  /** Its length in bytes. */
  size: number;
  media_type: string;
  /** The SHA-256 of its bytes, lowercase hex. */
  sha256: string;
}

/** What an `approval` question asks permission for: one tool call. */
export interface ApprovalAction {
  tool_name: string;
  arguments: JsonValue;
}

/** An answer body (`POST /questions/{id}/answer`), and the shape of a question's `default_response`. */
export interface AnswerBody<V extends JsonValue = JsonValue> {
  value: V;
  /** Free text for the agent, e.g. the reason for a rejection (at most 10 000 characters). */
  comment?: string;
  /** Replacement arguments, for an approval asked with `allow_edit`. */
  edited_arguments?: JsonObject;
}

/**
 * Who may answer, on top of the role rules: one person by username, or a minimum role. Asking, a role may also be
 * given to the member of exactly that role assigned a question least recently (`strategy: 'round_robin'`), who
 * becomes the question's assignee.
 */
export type Assignee = { user: string } | { role: Role } | { role: Role; strategy: 'round_robin' };

/** Who may approve a question that needs several approvals: that role and above, or these people (usernames). */
export type Eligible = { role: 'approver' | 'admin' } | { users: string[] };

/** One person's approval of a question that needs several. */
export interface Approval {
  by: string;
  at: string;
  comment?: string;
}

/** Which calls a grant covers: the approved call's run, its agent (or the asking token), or the whole workspace. */
export type GrantScope = 'run' | 'agent' | 'workspace';

/** What a call's arguments must be for a grant to let it through: exactly these, or (`shell`) a command prefix. */
export type ArgumentMatcher = { equals: JsonValue } | { command_prefix: string };

/** A grant ("always allow") made with an approval: later calls like it go through without asking. */
export interface GrantRequest {
  scope: GrantScope;
  /** Defaults to `{ equals: <the approved arguments> }`. */
  matcher?: ArgumentMatcher;
  /** 60 s ..= 30 days; 24 h by default. */
  expires_in_seconds?: number;
}

/** An answer, and with the approval of a tool call, optionally a grant. */
export interface AnswerRequest extends AnswerBody {
  grant?: GrantRequest;
}

/** A grant as the server lists it. */
export interface Grant {
  id: string;
  scope: GrantScope;
  run_id?: string;
  agent?: string;
  tool_name: string;
  matcher: ArgumentMatcher;
  created_by: string;
  question_id?: string;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  revoked_by?: string;
  uses: number;
  last_used_at: string | null;
}

/**
 * The body of `POST /questions`: every field a caller may set. What is left out gets the server's default for the
 * question's `kind`: `blocking`, `text`, urgency `high`, a 30-minute deadline.
 */
export interface NewQuestion extends FieldRules {
  /** 1..=300 characters. */
  title: string;
  /** Defaults to `blocking`. */
  kind?: QuestionKind;
  /** Defaults to `approval` for approval questions, `error_recovery` for error recovery, else `text`. */
  response_type?: ResponseType;
  /** Markdown, at most 32 KiB. */
  body?: string;
  /** 2..=20 choices with unique values; a plain string is its own value and label. */
  options?: Array<QuestionOption | string>;
  /** 1..=30 fields of a `form`. */
  fields?: FormField[];
  /**
   * Instead of `fields`: a JSON Schema object whose properties are MCP elicitation's primitives; it becomes the
   * form's fields, and answers are validated against it too. Implies `response_type: 'form'`.
   */
  response_schema?: JsonObject;
  /** The tool call an `approval` question is about. */
  action?: ApprovalAction;
  /** Whether the approver may send `edited_arguments` for the agent to call the tool with instead. */
  allow_edit?: boolean;
  /** A JSON object of at most 16 KiB, shown to the person. */
  context?: JsonObject;
  project?: string;
  run_id?: string;
  urgency?: Urgency;
  /** Seconds until the deadline (`non_blocking` questions may have none). */
  timeout_seconds?: number;
  /** What applies when the deadline passes with no answer; validated like an answer. */
  default_response?: AnswerBody;
  assignee?: Assignee;
  /** Where the question's own events are sent, signed with the workspace's callback secret. */
  callback_url?: string;
  /** For an approval: how many distinct people must approve (1..=10, default 1); the first rejection rejects. */
  required_approvals?: number;
  /** For an approval that needs several: who may give them. */
  eligible?: Eligible;
}

/** A question as the server returns it. Times are RFC 3339 strings. */
export interface Question extends FieldRules {
  id: string;
  /** The workspace's name. */
  workspace: string;
  project: string | null;
  run_id: string | null;
  tool_call_id: string | null;
  /** The lineage of runs, root first. */
  parent_run_ids: string[];
  kind: QuestionKind;
  response_type: ResponseType;
  title: string;
  body: string;
  options: QuestionOption[];
  fields: Array<Omit<FormField, 'options'> & { options?: QuestionOption[] }>;
  /** The JSON Schema it was asked with, as given (its `fields` were made from it). */
  response_schema?: JsonObject;
  action: ApprovalAction | null;
  allow_edit: boolean;
  context: JsonObject;
  urgency: Urgency;
  timeout_at: string | null;
  default_response: AnswerBody | null;
  status: QuestionStatus;
  response: AnswerBody | null;
  answered_by: string | null;
  resolution: Resolution | null;
  created_at: string;
  updated_at: string;
  resolved_at: string | null;
  assignee?: Assignee;
  /** Its escalation plan, when a policy applied as it was asked. */
  escalation?: Escalation;
  /** Where its own events are sent besides the workspace's webhooks. */
  callback_url?: string;
  /** How many approvals it needs (1 when absent), who may give them, and those given so far. */
  required_approvals?: number;
  eligible?: Eligible;
  approvals?: Approval[];
  /** Who holds its claim, until when: only they (or an admin) may answer meanwhile. */
  claimed_by?: string;
  claim_expires_at?: string;
}

/** When a question's people are reminded and when it is handed to `escalate_to`; each `*ed_at` once taken. */
export interface Escalation {
  remind_at: string | null;
  reminded_at: string | null;
  escalate_at: string | null;
  escalate_to: Assignee | null;
  escalated_at: string | null;
}

/** One page of a cursor-paginated list; pass `next_cursor` as `cursor` for the next one (`null`: the last). */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** The filters of `GET /questions`. */
export interface QuestionFilter {
  status?: QuestionStatus;
  kind?: QuestionKind;
  project?: string;
  urgency?: Urgency;
  run_id?: string;
  /** Matches title or body, case-insensitively. */
  q?: string;
  sort?: 'created_desc' | 'deadline';
  /** 1..=200, default 50. */
  limit?: number;
  cursor?: string;
}

/** One row of a `table` answer: a value per column key. */
export type TableRow = { [column: string]: string | boolean | number | null };

/** What a value of a form answer may be. */
export type FormValue = { [key: string]: string | string[] | boolean | number | TableRow[] | UploadedFile };

/** The shape of an answer's `value` for each response type. */
export interface ValueByResponseType {
  text: string;
  boolean: boolean;
  choice: string;
  multi_choice: string[];
  approval: boolean;
  /** `retry`, `skip`, `abort`, or one of the question's option values. */
  error_recovery: string;
  form: FormValue;
  number: number;
  integer: number;
  /** `YYYY-MM-DD`. */
  date: string;
  /** RFC 3339 with an offset. */
  datetime: string;
  /** `HH:MM`. */
  time: string;
  /** 1..=`max` stars. */
  rating: number;
  email: string;
  url: string;
  markdown: string;
  table: TableRow[];
  /** The stored file's record (asked with `{ file_id }` from `uploadFile`). */
  file: UploadedFile;
}

/** The type of a property of `Q` as given: `undefined` when it is left out. */
type Given<Q, K extends string> = Q extends { readonly [P in K]?: infer T } ? T : undefined;
type IsUnset<T> = unknown extends T ? true : [T] extends [undefined] ? true : false;
type DefaultResponseType<Kind> = IsUnset<Kind> extends true
  ? 'text'
  : [Kind] extends ['approval']
    ? 'approval'
    : [Kind] extends ['error_recovery']
      ? 'error_recovery'
      : [Kind] extends ['blocking' | 'non_blocking' | undefined]
        ? 'text'
        : 'text' | 'approval' | 'error_recovery';

/**
 * The response type a question gets: the one it names, else `form` with a `response_schema`, else its kind's
 * default.
 */
export type ResponseTypeOf<Q> =
  Given<Q, 'response_type'> extends infer T
    ? [T] extends [ResponseType]
      ? T
      : IsUnset<T> extends true
        ? IsUnset<Given<Q, 'response_schema'>> extends true
          ? DefaultResponseType<Given<Q, 'kind'>>
          : 'form'
        : ResponseType
    : never;

/** The type of the answer to a question like `Q`: `ask({title, response_type: 'boolean'})` answers a `boolean`. */
export type AnswerValue<Q> = ValueByResponseType[ResponseTypeOf<Q>];

/**
 * What became of a question: `answered` (a person answered; that may well be a "no"), `defaulted` (the deadline
 * passed and the question's default applied), `expired` (the deadline passed and nobody answered: not a "no"),
 * `cancelled` (withdrawn, superseded, or its run ended), or `pending` when the caller chose not to wait until then.
 */
export type Outcome = QuestionStatus;

/** What an agent acts on once it has asked. */
export interface AskResult<V = JsonValue> {
  readonly outcome: Outcome;
  /** The answer's value (a person's, or the default's); `undefined` when the question expired, was cancelled or
   * is still pending. */
  readonly value: V | undefined;
  /** The answer's comment; for a cancelled question, the reason it was cancelled, if one was given. */
  readonly comment: string | undefined;
  /** The arguments an approver edited, for approvals asked with `allow_edit`. */
  readonly editedArguments: JsonObject | undefined;
  /** Who answered (a username or a token's name); `undefined` unless a person answered. */
  readonly answeredBy: string | undefined;
  /** The question as the server last returned it. */
  readonly question: Question;
}

/** What the workspace's approval rules decided about a call (`POST /decide`). */
export type Decision = 'allow' | 'ask' | 'deny';

/**
 * What became of an approval: a question's outcome when a person was asked; `allowed_by_rule` or `allowed_by_grant`
 * when the call may run without asking; `denied_by_rule` when a rule refuses it.
 */
export type ApprovalOutcome = Outcome | 'allowed_by_rule' | 'allowed_by_grant' | 'denied_by_rule';

/** The answer of `POST /decide`. */
export interface DecideResponse {
  /** `ask` only while the approval question is pending. */
  decision: Decision;
  /** The deciding rule's name; null when the document's default decided. */
  rule: string | null;
  /** The rule's reason; for a call a person rejected, who and their comment. */
  reason?: string;
  /** The approval question asked, when the rules asked a person. */
  question?: Question;
  /** The grant that let the call through without asking. */
  grant_id?: string;
  /** With `allow`: what to call the tool with (the approver's edit, else the arguments asked about). */
  arguments?: JsonValue;
}

/**
 * What became of a request to make one tool call, as the workspace's approval rules decided it (`POST /decide`).
 * A rule may allow the call (`allowed_by_rule`, or `allowed_by_grant` when an earlier approval's grant covers it) or
 * refuse it (`denied_by_rule`, with `rule` and `ruleReason`) without asking anyone: then `question` is undefined.
 * Otherwise a person was asked and `outcome` is the question's: `approved` is true only for a yes (a person's, or a
 * default that approves); an expired or cancelled approval is not approved either, and `outcome` says that nobody
 * decided, which is not a "no".
 */
export interface ApprovalResult {
  readonly outcome: ApprovalOutcome;
  /** The rules' decision: `ask` while a person has not decided. */
  readonly decision: Decision;
  /** The deciding rule's name; undefined when the document's default decided. */
  readonly rule: string | undefined;
  /** The server's reason: the rule's (always given with `denied_by_rule`), or why a person's decision went against
   * the call. */
  readonly ruleReason: string | undefined;
  /** The grant that let the call through without asking (`allowed_by_grant`). */
  readonly grantId: string | undefined;
  /** The person's (or the default's) answer; undefined when nobody was asked or nobody answered. */
  readonly value: boolean | undefined;
  readonly comment: string | undefined;
  /** The arguments an approver edited, for approvals asked with `allow_edit`. */
  readonly editedArguments: JsonObject | undefined;
  /** Who answered (a username or a token's name); undefined unless a person answered. */
  readonly answeredBy: string | undefined;
  /** The approval question as the server last returned it; undefined when the rules decided without asking. */
  readonly question: Question | undefined;
  readonly approved: boolean;
  /** A person's decision against the call: their "no", or a default of `false`; not an expiry, a cancellation or a
   * rule's refusal. */
  readonly rejected: boolean;
  /** Whether a rule refused the call without asking anyone. */
  readonly deniedByRule: boolean;
  /** What to call the tool with: the approver's edit if there is one, else the arguments asked about. */
  readonly arguments: JsonValue;
  /** One sentence for a model or a log: why the call may run, or why not (the rule's reason, the rejection's
   * comment). */
  readonly reason: string;
}

/**
 * The body of an approval request made with `approve()`: the tool call, and how to ask a person about it should the
 * rules say `ask` (the deciding rule's own `ask` settings win; `default` applies only when no rule, but the
 * document's default, asked).
 */
export interface ApprovalRequest extends Omit<NewQuestion, 'title' | 'kind' | 'response_type' | 'action' | 'options' | 'fields' | 'default_response'> {
  tool_name: string;
  arguments?: JsonObject;
  /** Defaults to "Allow <tool_name>?". */
  title?: string;
  /** What applies when nobody decides before the deadline; without it the approval expires unapproved. */
  default?: boolean;
  /** The name the rules' `agents` globs match; default the token's name. */
  agent?: string;
}

/** The `event:` types the server sends; others may be added, so events of unknown types come through as well. */
export type EventType =
  | 'question_asked'
  | 'question_answered'
  | 'question_expired'
  | 'question_cancelled'
  | 'question_reminded'
  | 'question_escalated'
  | 'question_claimed'
  | 'question_approval_added'
  | 'run_status';

/** The `data` of a `run_status` event. */
export interface RunStatusData {
  run_id: string;
  status: string;
  agent_name: string;
  project: string | null;
  parent_run_id: string | null;
  step_count: number;
  error_message: string | null;
  updated_at: string;
}

/** One entry of the event stream. */
export interface HoldpointEvent {
  /** The event log's id: what `Last-Event-ID` resumes after. */
  readonly id: number;
  readonly type: EventType | (string & {});
  /** The event's JSON as sent. */
  readonly data: JsonObject;
  /** The question as the change left it, for question events. */
  readonly question: Question | undefined;
}
