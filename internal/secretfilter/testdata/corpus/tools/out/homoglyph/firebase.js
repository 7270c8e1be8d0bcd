соnst firеbаsеСоnfig = {
  арiКеу: "АIzасbVZgСQbАIВgоlbСDхGGYdуSjvkv_Izqkzg",
  аuthDоmаin: "асmе-рrоd.firеbаsеарр.соm",
};
