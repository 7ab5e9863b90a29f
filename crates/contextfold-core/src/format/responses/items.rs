//! The catalogue of Responses input items: the tool call items paired with their outputs
//! (how each names its id, tool and input), the outputs, and the other items the model or the
//! caller sends, which the reader places beside the messages.

/// How a tool call item names its id, tool and input.
pub(super) struct CallKind {
    /// The item `type`.
    pub kind: &'static str,
    /// The tool name when the item has none of its own (`local_shell_call` is `local_shell`).
    pub fixed_name: Option<&'static str>,
    /// The field holding the input.
    pub input_field: &'static str,
    /// How the input is written.
    pub input: InputStyle,
}

/// How a call's input is held in the item.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum InputStyle {
    /// A JSON text (`arguments`).
    JsonText,
    /// Free text (`input` of a custom tool), modelled as `{"input": text}`.
    FreeText,
    /// A JSON value (`action`, `operation`).
    Value,
}

/// The tool call items we pair with their outputs.
pub(super) const CALLS: &[CallKind] = &[
    CallKind { kind: "function_call", fixed_name: None, input_field: "arguments", input: InputStyle::JsonText },
    CallKind { kind: "custom_tool_call", fixed_name: None, input_field: "input", input: InputStyle::FreeText },
    CallKind {
        kind: "local_shell_call",
        fixed_name: Some("local_shell"),
        input_field: "action",
        input: InputStyle::Value,
    },
    CallKind { kind: "shell_call", fixed_name: Some("shell"), input_field: "action", input: InputStyle::Value },
    CallKind {
        kind: "apply_patch_call",
        fixed_name: Some("apply_patch"),
        input_field: "operation",
        input: InputStyle::Value,
    },
    CallKind { kind: "computer_call", fixed_name: Some("computer"), input_field: "action", input: InputStyle::Value },
];

/// The output items answering [`CALLS`], by `call_id`.
pub(super) const OUTPUTS: &[&str] = &[
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "computer_call_output",
];

/// Items the model produces, beside assistant messages, reasoning and calls.
pub(super) const ASSISTANT_ITEMS: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "tool_search_output",
];

/// Items the caller sends, beside its messages and outputs.
pub(super) const USER_ITEMS: &[&str] =
    &["mcp_approval_response", "item_reference", "additional_tools", "compaction_trigger"];
