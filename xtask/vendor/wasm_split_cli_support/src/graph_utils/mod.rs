pub mod tarjan_scc;
