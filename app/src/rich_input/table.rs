//! The table editor: rows of cells, each an input of its column's type, added and removed within the table's bounds.

use std::collections::HashMap;

use leptos::prelude::*;

use super::{Entries, Row, path_of};
use crate::types::{FormField, ResponseType, TableColumn};

/// A table's rows, each cell an input of its column's type, with rows added and removed within the table's bounds.
#[component]
pub(super) fn TableEditor(
    field: FormField,
    label: String,
    input_id: String,
    testid: String,
    entries: Entries,
) -> impl IntoView {
    let key = field.key.clone();
    let path = path_of(&key);
    let min = field.rules.min_rows.unwrap_or(0) as usize;
    let max = field.rules.max_rows.unwrap_or(crate::types::TABLE_ROWS_MAX) as usize;
    let columns = StoredValue::new(field.rules.columns.clone());
    let rows = {
        let key = key.clone();
        move || entries.tables.with(|t| t.get(&key).cloned().unwrap_or_default())
    };
    let count = {
        let rows = rows.clone();
        move || rows().len()
    };
    let add = {
        let key = key.clone();
        move |_: leptos::ev::MouseEvent| {
            let id = entries.next_row.get_value() + 1;
            entries.next_row.set_value(id);
            entries.tables.update(|t| t.entry(key.clone()).or_default().push(Row { id, cells: HashMap::new() }));
        }
    };
    let caption_id = format!("{input_id}-caption");
    let count_add = count.clone();
    let add_testid = format!("{testid}-add");
    let table_testid = testid.clone();
    view! {
        <div class="table-editor" id=input_id.clone() data-testid=table_testid>
            <table>
                <caption id=caption_id>{label}</caption>
                <thead>
                    <tr>
                        {columns.get_value().into_iter().map(|c| view! { <th scope="col">{c.label}{c.required.then_some(" *")}</th> }).collect_view()}
                        <th scope="col"><span class="visually-hidden">"Remove"</span></th>
                    </tr>
                </thead>
                <tbody>
                    <For each=rows key=|row| row.id children=move |row: Row| {
                        let id = row.id;
                        let key = key.clone();
                        let index = {
                            let key = key.clone();
                            move || {
                                entries.tables.with(|t| {
                                    t.get(&key).and_then(|rows| rows.iter().position(|r| r.id == id)).unwrap_or(0)
                                })
                            }
                        };
                        let index = Signal::derive(index);
                        let testid = testid.clone();
                        let path = path.clone();
                        let remove = {
                            let key = key.clone();
                            move |_: leptos::ev::MouseEvent| {
                                entries.tables.update(|t| {
                                    if let Some(rows) = t.get_mut(&key) {
                                        rows.retain(|r| r.id != id);
                                    }
                                })
                            }
                        };
                        let count = count.clone();
                        let remove_testid = format!("{testid}-remove");
                        view! {
                            <tr>
                                {columns.get_value().into_iter().map(|column| {
                                    view! { <Cell column row_id=id table_key=key.clone() index path=path.clone() testid=testid.clone() entries/> }
                                }).collect_view()}
                                <td>
                                    <button type="button" class="link"
                                        data-testid=move || format!("{remove_testid}-{}", index.get())
                                        aria-label=move || format!("Remove row {}", index.get() + 1)
                                        disabled=move || { count() <= min }
                                        on:click=remove>"Remove"</button>
                                </td>
                            </tr>
                        }
                    }/>
                </tbody>
            </table>
            <button type="button" data-testid=add_testid disabled=move || { count_add() >= max } on:click=add>"Add row"</button>
        </div>
    }
}

/// One cell of a table being edited.
#[component]
fn Cell(
    column: TableColumn,
    row_id: u32,
    table_key: String,
    index: Signal<usize>,
    path: String,
    testid: String,
    entries: Entries,
) -> impl IntoView {
    let column_key = column.key.clone();
    let current = {
        let (table_key, column_key) = (table_key.clone(), column_key.clone());
        move || {
            entries.tables.with(|t| {
                t.get(&table_key)
                    .and_then(|rows| rows.iter().find(|r| r.id == row_id))
                    .and_then(|row| row.cells.get(&column_key).cloned())
                    .unwrap_or_default()
            })
        }
    };
    let set = {
        let (table_key, column_key) = (table_key.clone(), column_key.clone());
        move |ev: leptos::ev::Event| {
            let text = event_target_value(&ev);
            entries.tables.update(|t| {
                if let Some(row) = t.get_mut(&table_key).and_then(|rows| rows.iter_mut().find(|r| r.id == row_id)) {
                    row.cells.insert(column_key.clone(), text);
                }
            });
        }
    };
    let label = column.label.clone();
    let name = move || format!("{label}, row {}", index.get() + 1);
    let cell_path = {
        let column_key = column_key.clone();
        move || format!("{path}[{}].{column_key}", index.get())
    };
    let cell_testid = {
        let column_key = column_key.clone();
        move || format!("{testid}-{}-{column_key}", index.get())
    };
    let error = {
        let cell_path = cell_path.clone();
        move || entries.errors.with(|e| e.get(&cell_path()).cloned())
    };
    let invalid = {
        let error = error.clone();
        move || error().is_some().then_some("true")
    };
    let input = match column.response_type {
        ResponseType::Boolean => view! {
            <select aria-label=name data-testid=cell_testid aria-invalid=invalid prop:value=current on:change=set>
                <option value="">"—"</option>
                <option value="true">"Yes"</option>
                <option value="false">"No"</option>
            </select>
        }
        .into_any(),
        ResponseType::Choice => view! {
            <select aria-label=name data-testid=cell_testid aria-invalid=invalid prop:value=current on:change=set>
                <option value="">"—"</option>
                {column.options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        other => {
            let (kind, step) = super::cell_input(other);
            view! {
                <input type=kind step=step aria-label=name data-testid=cell_testid aria-invalid=invalid
                    prop:value=current on:input=set/>
            }
            .into_any()
        }
    };
    view! {
        <td data-label=column.label.clone()>
            {input}
            {move || error().map(|problem| view! { <p class="field-error" data-testid="field-error" data-path=cell_path()>{problem}</p> })}
        </td>
    }
}
