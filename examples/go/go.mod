module cuzk.example/cuzk

go 1.19
